"""Habits people bring from other chat apps, driven through the real chat window and model.

Unload with the worker's memory shown, system-prompt presets, the context meter and leaving out
the oldest turns when a conversation outgrows the context, Tab out of the message box, and
"Try MTP depth 3" on a reply the adaptive depth ran without drafts (the demo on a CPU where
drafting measured slower than plain decoding).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from app.engine.chat.conversation import ChatSettings
from app.engine.chat.history import HISTORY_FILE_NAME, HistoryStore
from app.engine.chat.prompt_presets import SHIPPED
from app.engine.runtime.core.request import GenerationResult
from app.engine.runtime.core.stats import DecodeStats
from app.engine.settings import Settings, app_dirs

LONG_MESSAGE = "Tell me about the weather in the mountains today. " * 12


@pytest.mark.slow
def test_unload_gives_the_memory_back_and_choosing_the_model_loads_it_again(
    chat, tiny_gguf: Path
) -> None:
    window = chat.open()
    chat.load(window, tiny_gguf)
    bar = window.model_bar
    chat.qtbot.waitUntil(lambda: bar.memory_label.text().startswith("RAM in use: "))
    assert bar.unload_button.isEnabled()
    worker = window.bridge.worker_pid
    assert worker is not None

    chat.qtbot.mouseClick(bar.unload_button, Qt.MouseButton.LeftButton)
    chat.qtbot.waitUntil(lambda: window.bridge.worker_pid is None, timeout=30_000)
    chat.qtbot.waitUntil(lambda: "is not loaded" in bar.state.text())
    assert bar.memory_label.text() == "" and not bar.unload_button.isEnabled()
    assert window.loaded_model is None

    bar.picker.activated.emit(bar.picker.currentIndex())  # the user picks it again
    chat.qtbot.waitUntil(lambda: bar.state.text() == f"Ready: {tiny_gguf.name}", timeout=60_000)
    assert window.bridge.worker_pid not in (None, worker)


def test_a_preset_fills_the_system_prompt_and_the_users_own_are_kept(chat) -> None:
    window = chat.open()
    panel = window.settings_panel
    names = [panel.presets.itemText(i) for i in range(panel.presets.count())]
    assert names == [name for name, _text in SHIPPED]
    panel.presets.setCurrentIndex(names.index("Concise"))
    panel.presets.activated.emit(names.index("Concise"))
    assert panel.system_prompt.toPlainText() == dict(SHIPPED)["Concise"]
    assert not panel.delete_preset_button.isEnabled()  # a shipped preset stays

    panel.system_prompt.setPlainText("Answer like a pirate.")
    chat.qtbot.mouseClick(panel.save_preset_button, Qt.MouseButton.LeftButton)
    dialog = window.presets.name_dialog
    assert dialog is not None
    dialog.setTextValue("Pirate")
    dialog.accept()
    names = [panel.presets.itemText(i) for i in range(panel.presets.count())]
    assert names[0] == "Pirate"

    reopened = chat.open()  # the preset lives in the history
    panel = reopened.settings_panel
    panel.presets.setCurrentIndex(0)
    panel.presets.activated.emit(0)
    assert panel.system_prompt.toPlainText() == "Answer like a pirate."
    assert panel.delete_preset_button.isEnabled()
    chat.qtbot.mouseClick(panel.delete_preset_button, Qt.MouseButton.LeftButton)
    assert panel.presets.itemText(0) != "Pirate"


@pytest.mark.slow
def test_a_full_context_leaves_out_the_oldest_turns_and_the_meter_says_so(
    chat, tiny_gguf: Path
) -> None:
    window = chat.open()
    window.apply_settings(replace(Settings(), context_length=512))
    chat.load(window, tiny_gguf)
    panel = window.settings_panel
    panel.max_tokens.setValue(16)
    meter = window.context_meter
    assert meter.isVisible() and meter.label.text() == "Context 0 / 512 tokens"

    panel.drop_oldest.setChecked(False)
    replies = [chat.ask(window, f"{index}: {LONG_MESSAGE}") for index in range(6)]
    failed = next((reply for reply in replies if reply.notice.isVisible()), None)
    assert failed is not None, "the conversation never outgrew 512 tokens"
    assert "choose a larger Context window in Settings" in failed.notice.text()
    assert "--ctx" not in failed.notice.text()
    assert meter.drop_button.isVisible() and "nearly full" in meter.label.text()

    chat.qtbot.mouseClick(meter.drop_button, Qt.MouseButton.LeftButton)
    assert panel.drop_oldest.isChecked() and not meter.drop_button.isVisible()
    trimmed = chat.ask(window, f"again: {LONG_MESSAGE}")
    assert trimmed.notice.isVisible()
    assert "oldest messages were left out" in trimmed.notice.text()
    assert "512-token context" in trimmed.notice.text()
    assert "the oldest turns will be left out" in meter.label.text()


def test_tab_leaves_the_message_box(chat) -> None:
    window = chat.open()
    editor = window.composer.editor
    editor.setFocus()
    editor.setPlainText("a message")
    chat.qtbot.keyClick(editor, Qt.Key.Key_Tab)
    assert editor.toPlainText() == "a message"  # no tab character typed
    assert QApplication.focusWidget() is not editor


def _store_auto_reply_without_drafts() -> int:
    """A conversation whose reply the adaptive depth ran plainly, as the app stores one."""
    store = HistoryStore(app_dirs().data / HISTORY_FILE_NAME)
    try:
        conversation = store.create_conversation("Strings", ChatSettings(temperature=0.0))
        store.add_user_message(conversation, "Write a function that reverses a string.")
        reply = store.start_reply(conversation, "tiny-mtp.gguf")
        stats = DecodeStats(
            mode="lc",
            depth=4,
            prompt_tokens=20,
            generated_tokens=40,
            cycles=40,
            drafted_by_depth=(0, 0, 0, 0),
            accepted_by_depth=(0, 0, 0, 0),
            prefill_seconds=0.01,
            ttft_seconds=0.02,
            elapsed_seconds=1.0,
            draft_seconds=0.0,
            draft_steps=0,
            verify_seconds=0.9,
            verify_calls=40,
            adaptive=True,
            auto_plain_rate=41.0,
            auto_depth_rates=(37.0, 33.0, 30.5, 27.0, 24.0),
            auto_kept_through=(0.76, 0.56, 0.36, 0.2),
        )
        result = GenerationResult("def reverse(s): ...", (), 20, "stop", stats, seed=1)
        store.finish_reply(reply.id, result)
        return conversation
    finally:
        store.close()


@pytest.mark.slow
def test_a_reply_auto_ran_without_drafts_says_why_and_tries_depth_3(chat, tiny_gguf: Path) -> None:
    conversation = _store_auto_reply_without_drafts()
    window = chat.open()
    chat.load(window, tiny_gguf)
    window.open_conversation(conversation)
    reply = window.transcript.messages[-1]
    chat.qtbot.waitUntil(reply.notice.isVisible)
    assert reply.notice.text() == (
        "Auto drafted 0: on this machine a draft costs more than it saves (depth 1 ran at 0.80× "
        "plain decoding's speed); depth 3 keeps 76 / 56 / 36 % of its drafts"
    )
    assert "0 %" not in reply.figures.text()  # no row of zeros that reads as broken
    assert "Auto drafted 0" not in reply.figures.text()  # said once, in the notice
    assert "MTP auto: no drafts" in reply.summary.text()
    button = reply.try_depth_button
    assert button.isVisible() and button.text() == "Try MTP depth 3"

    chat.qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    again = chat.wait_reply(window)
    stored = window.store.conversation(conversation).messages[-1]
    assert stored.stats is not None and stored.stats.depth == 3 and not stored.stats.adaptive
    assert any(stored.stats.drafted_by_depth)  # it drafted
    assert again.version_label.text() == "2/2"  # the auto reply is kept as version 1
    assert window.settings_panel.settings().mtp_depth == 3
    assert "MTP depth 3" in again.figures.text()
