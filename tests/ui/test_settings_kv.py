"""The load options in Settings (context, KV cache type, flash attention, kept states, threads):
saved and shown again, a quantised cache without flash attention refused with its reason, and the
model bar's memory estimate redone when they change."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app.engine.chat.context_choice import load_settings_for
from app.engine.chat.model_files import describe_model
from app.engine.load_options import LoadOptions
from app.engine.runtime.core.cpu_threads import choose_threads
from app.engine.runtime.core.demo_model import demo_model_path
from app.engine.settings import Settings, SettingsError, SettingsStore
from app.ui.chat.widgets.model_bar import ModelBar
from app.ui.settings_dialog import SettingsDialog
from tests.runtime.tiny_model import write_tiny_qwen35

GIB = 1 << 30


def test_the_dialog_saves_the_load_options_and_shows_them_again(qtbot) -> None:
    store = SettingsStore()
    dialog = SettingsDialog(store, store.load())
    qtbot.addWidget(dialog)
    assert dialog.context_spin.text() == "auto: the largest that fits this machine"
    assert dialog.kv_type_combo.currentText() == "f16"
    assert dialog.flash_combo.currentText() == "auto"
    dialog.context_spin.setValue(8192)
    dialog.kv_type_combo.setCurrentText("q8_0")
    dialog.flash_combo.setCurrentText("on")
    dialog.state_cache_spin.setValue(512)
    default = choose_threads()
    assert dialog.threads_spin.text() == f"auto: {default.threads} ({default.reason})"
    dialog.threads_spin.setValue(3)
    dialog._save()
    assert dialog.error_label.text() == ""
    saved = store.load()
    assert saved == Settings(
        context_length=8192,
        kv_cache_type="q8_0",
        flash_attention="on",
        state_cache_mib=512,
        threads=3,
    )
    assert load_settings_for(describe_model(demo_model_path()), saved).threads == 3

    again = SettingsDialog(store, saved)
    qtbot.addWidget(again)
    assert again.context_spin.value() == 8192
    assert again.kv_type_combo.currentText() == "q8_0"
    assert again.flash_combo.currentText() == "on"
    assert again.state_cache_spin.value() == 512
    assert again.threads_spin.value() == 3
    assert again.edited_settings() == saved


def test_a_quantised_cache_without_flash_attention_is_refused_with_its_reason(qtbot) -> None:
    store = SettingsStore()
    dialog = SettingsDialog(store, Settings())
    qtbot.addWidget(dialog)
    dialog.kv_type_combo.setCurrentText("q4_0")
    dialog.flash_combo.setCurrentText("off")
    dialog._save()
    # named as the form names them, not by the settings file's keys
    assert "KV cache type q4_0 needs flash attention" in dialog.error_label.text()
    assert "set Flash attention to auto or on" in dialog.error_label.text()
    assert not store.path.exists()


def _total(text: str) -> float:
    figure, unit = re.search(r"memory ≈ ([\d.]+) (kB|MB|GB)", text).groups()
    return float(figure) * {"kB": 1e3, "MB": 1e6, "GB": 1e9}[unit]


def test_the_model_bar_estimate_follows_the_load_options(qtbot) -> None:
    bar = ModelBar()
    qtbot.addWidget(bar)
    bar._memory = 16 * GIB  # the machine, fixed so the chosen context is known
    model = describe_model(demo_model_path())
    bar.set_models([model], model)
    text = bar.info.text()
    trained = model.shape.trained_context
    assert "f16 cache" in text and f"for {trained} tokens" in text
    assert "fits in 17.2 GB RAM · context: the model's trained context, which fits" in text
    assert "kept states ≤ 1.1 GB" in text  # the default 1024 MiB

    bar.set_load_options(LoadOptions(context_length=2048, kv_cache_type="q8_0", state_cache_mib=0))
    smaller = bar.info.text()
    assert "q8_0 cache" in smaller and "for 2048 tokens" in smaller
    assert "context: 2,048 tokens, as set in Settings" in smaller
    assert "kept states" not in smaller
    assert _total(smaller) < _total(text)


def test_the_model_bar_says_when_a_model_cannot_take_the_chosen_kv_type(
    qtbot, tmp_path: Path
) -> None:
    model = describe_model(write_tiny_qwen35(tmp_path / "tiny.gguf"))  # 16-wide heads
    bar = ModelBar()
    qtbot.addWidget(bar)
    bar.set_load_options(LoadOptions(kv_cache_type="q8_0"))
    bar.set_models([model], model)
    text = bar.info.text()
    assert "f16 cache" in text
    assert "KV cache f16: tiny.gguf&#x27;s attention heads are 16 values wide" in text


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("kv_cache_type", "q5", "kv_cache_type 'q5' is unknown: use one of f16, q8_0, q4_0"),
        ("flash_attention", "yes", "flash_attention 'yes' is unknown: use one of auto, on, off"),
        ("context_length", -1, "context_length -1 is invalid"),
        ("state_cache_mib", True, "field 'state_cache_mib' must be a int, got True"),
    ],
)
def test_a_bad_load_option_in_the_settings_file_is_named(
    field: str, value: object, message: str
) -> None:
    store = SettingsStore()
    store.path.parent.mkdir(parents=True, exist_ok=True)
    store.path.write_text(json.dumps({"version": 1, field: value}))
    with pytest.raises(SettingsError, match=re.escape(message)):
        store.load()
