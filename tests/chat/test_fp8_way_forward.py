"""An FP8 release downloaded from the Hub and opened in the chat, as a new user does it.

mlx-lm cannot load FP8 checkpoints. The chat says so in one line, with the details folded away,
and offers what works: converting it here (a job with progress; the copy opens when done) or a
converted repo from the Hub. A long error never makes the main window taller (it grew past the
screen, and never shrank back, when the banner listed 62 ``…weight_scale_inv`` tensor names).
"""

from __future__ import annotations

from pathlib import Path

import mlx_lm
import pytest
from huggingface_hub import snapshot_download
from PySide6.QtCore import Qt

from app.engine.convert.fp8_check import FP8_REFUSAL
from app.engine.runtime.backends.mlx.backend import load_failure
from app.engine.runtime.core.demo_model import MODELS_DIR
from app.engine.settings import app_dirs
from app.engine.store import JobState
from app.ui.main_window import MainWindow
from app.ui.shell.pages import JOBS, MODELS
from tests.store.isolation import IsolatedHome

REPO = "acme/Demo-MTP-FP8"
FP8_DEMO = MODELS_DIR / "demo-mtp-fp8"
SHOTS = Path("/tmp/shots-convert25")
LOAD_TIMEOUT_MS = 120_000


@pytest.fixture
def downloaded(local_hub, home: IsolatedHome) -> Path:
    """The demo's FP8 release published on the local hub and downloaded by the real client."""
    local_hub.seed_folder(REPO, FP8_DEMO)
    return Path(snapshot_download(REPO, cache_dir=home.hub_cache))


@pytest.fixture
def main_window(qtbot, main_window: MainWindow) -> MainWindow:
    """The shared main window, exposed on screen (the tests take screenshots of it)."""
    qtbot.waitExposed(main_window)
    return main_window


def _fp8_shown(window: MainWindow) -> bool:
    chat = window.chat_window
    return chat is not None and chat.banner.isVisible() and FP8_REFUSAL in chat.banner.text()


@pytest.mark.slow
def test_pressing_chat_on_an_fp8_release_says_why_in_one_line_and_offers_a_conversion(
    qtbot, main_window: MainWindow, downloaded: Path
) -> None:
    height = main_window.height()
    chat = main_window.open_chat()
    chat.show_for_repo(REPO)
    qtbot.waitUntil(lambda: _fp8_shown(main_window), timeout=LOAD_TIMEOUT_MS)
    banner = chat.banner
    SHOTS.mkdir(parents=True, exist_ok=True)
    banner.grab().save(str(SHOTS / "fp8-error-banner.png"))
    main_window.grab().save(str(SHOTS / "fp8-error-chat-page.png"))
    summary = banner.summary.text()
    assert summary.startswith(f"{FP8_REFUSAL}: ") and "\n" not in summary
    assert "weight_scale_inv" not in summary.replace("`_scale_inv`", "")
    assert summary.startswith(f"{FP8_REFUSAL}: Demo-MTP-FP8 stores its weights as FP8")
    assert banner.height() < 120  # a few lines, whatever the message's length
    assert banner.details_button.isVisible() and not banner.details.isVisible()
    convert_button = banner.actions_shown[0]
    assert convert_button.text() == "Convert for MLX…" and convert_button.isVisible()
    assert "search the Hub for a BF16 or MLX conversion of Demo-MTP-FP8" in banner.hint.text()
    assert main_window.height() == height
    assert main_window.statusBar().isVisible()

    qtbot.mouseClick(convert_button, Qt.MouseButton.LeftButton)
    dialog = chat.convert.confirmation
    assert dialog is not None and dialog.isVisible()
    assert "Demo-MTP-mlx-4bit" in dialog.informativeText()
    dialog.grab().save(str(SHOTS / "convert-dialog.png"))
    chat.convert.choice_button("MLX 4-bit").click()
    converted = app_dirs().converted_models / "Demo-MTP-mlx-4bit"
    qtbot.waitUntil(
        lambda: chat.model_bar.state.text() == f"Ready: {converted.name}",
        timeout=LOAD_TIMEOUT_MS,
    )
    assert not banner.isVisible()
    assert "Sidecar paired" in chat.model_bar.info.text()
    row = main_window.jobs.job_at(0)
    assert row.record.spec.title == "Convert Demo-MTP-FP8 to MLX 4-bit"
    assert row.state is JobState.SUCCEEDED and row.percent == 100
    main_window.show_page(JOBS)
    main_window.grab().save(str(SHOTS / "jobs-after-conversion.png"))


def test_chat_from_the_models_page_opens_the_chat_on_the_fp8_download_with_its_way_forward(
    qtbot, main_window: MainWindow, downloaded: Path
) -> None:
    main_window.show_page(MODELS)
    library = main_window.library
    library.refresh()  # the window was opened before the download
    qtbot.waitUntil(lambda: not library.scanning, timeout=LOAD_TIMEOUT_MS)
    assert library.select(downloaded), [model.path for model in library.models]
    assert library.chat_action.isEnabled()
    assert library.chat_action.toolTip().startswith(f"{FP8_REFUSAL}: Demo-MTP-FP8")
    qtbot.mouseClick(library.buttons[library.chat_action], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: _fp8_shown(main_window), timeout=LOAD_TIMEOUT_MS)
    assert main_window.current_page == "chat"
    assert [b.text() for b in main_window.chat_window.banner.actions_shown] == ["Convert for MLX…"]


@pytest.mark.slow
def test_a_long_load_error_keeps_the_window_height_and_folds_its_details(
    qtbot, main_window: MainWindow
) -> None:
    with pytest.raises(ValueError) as raised:  # what mlx-lm says about an FP8 checkpoint
        mlx_lm.load(str(FP8_DEMO))
    message = load_failure(FP8_DEMO, raised.value)
    assert message.count("weight_scale_inv") == 62
    height = main_window.height()
    chat = main_window.open_chat()
    qtbot.waitUntil(  # the scan ends by loading the preferred model (the bundled demo)
        lambda: chat.model_bar.state.text().startswith("Ready"), timeout=LOAD_TIMEOUT_MS
    )
    chat.bridge.load_failed.emit(message)  # as the runtime's worker reports a failed load
    banner = chat.banner
    qtbot.waitUntil(banner.isVisible)
    assert banner.summary.text() == (
        "mlx-lm could not load demo-mtp-fp8: Received 62 parameters not in model; the folder "
        "needs config.json, the tokenizer and .safetensors weights of an architecture mlx-lm "
        "supports"
    )
    assert banner.text() == message
    qtbot.wait(50)
    assert main_window.height() == height
    qtbot.mouseClick(banner.details_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(banner.details.isVisible)
    assert banner.details.toPlainText().count("weight_scale_inv") == 62
    assert banner.details.height() <= 160
    main_window.grab().save(str(SHOTS / "load-error-details-open.png"))
    qtbot.wait(50)
    assert main_window.height() == height
    banner.show_text("")
    qtbot.wait(50)
    assert not banner.isVisible() and main_window.height() == height
