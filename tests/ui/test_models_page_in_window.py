"""The Models page inside the main window: its actions lead where a user expects — Chat opens
the Chat page on that model, "Add MTP head…" grafts the paired sidecar as a job in Jobs and
selects the new file, "Download sidecar" opens the download wizard on the sidecar repo."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMessageBox

from app.engine.library.inventory import SIDECAR_ON_HUB
from app.engine.mtp import LocalFolderSource, extract_mtp
from app.engine.settings import SettingsStore
from app.ui.main_window import MainWindow
from app.ui.wizards.download import DownloadWizard
from tests.chat.hub_cache import put_in_cache
from tests.graft.bases import DEMO_FP8, DEMO_GGUF, write_trunk_only
from tests.store.isolation import IsolatedHome

LOAD_TIMEOUT_MS = 60_000
ENTRY_REPO = "mtp-studio/Qwen3.5-27B-Q4_K_M-GGUF"  # in the bundled catalog
ENTRY_SIDECAR = "mtp-studio/qwen3-5-27b-mtp"


@pytest.fixture
def models_folder(home: IsolatedHome) -> Path:
    folder = home.root / "my-models"
    folder.mkdir()
    write_trunk_only(DEMO_GGUF, folder / "demo-trunk.gguf")
    extract_mtp(LocalFolderSource(DEMO_FP8), folder / "mtp.safetensors")
    SettingsStore().update(models_dir=str(folder))
    return folder


def _scanned(qtbot, window: MainWindow) -> None:
    qtbot.waitUntil(
        lambda: not window.library.scanning and bool(window.library.models), timeout=30_000
    )


def _trunk_selected(qtbot, window: MainWindow, models_folder: Path) -> tuple[MainWindow, Path]:
    """The Models page shown, scanned, with the head-less demo trunk selected."""
    window.show_page("models")
    _scanned(qtbot, window)
    base = models_folder / "demo-trunk.gguf"
    assert window.library.select(base)
    return window, base


@pytest.mark.slow
def test_chat_on_the_models_page_opens_the_chat_on_that_model(
    qtbot, main_window: MainWindow
) -> None:
    main_window.page_actions["models"].trigger()
    _scanned(qtbot, main_window)
    demo = next(m for m in main_window.library.models if m.path.name == "demo-mtp.gguf")
    assert main_window.library.select(demo.path)
    main_window.library.chat_action.trigger()
    chat = main_window.chat_window
    assert chat is not None and main_window.current_page == "chat"
    qtbot.waitUntil(
        lambda: chat.model_bar.state.text() == "Ready: demo-mtp.gguf", timeout=LOAD_TIMEOUT_MS
    )
    main_window.shutdown()
    qtbot.waitUntil(lambda: chat.shut_down, timeout=LOAD_TIMEOUT_MS)


@pytest.mark.slow
def test_add_mtp_head_grafts_the_paired_sidecar_as_a_job(
    qtbot, models_folder: Path, open_window: Callable[[], MainWindow]
) -> None:
    window, base = _trunk_selected(qtbot, open_window(), models_folder)
    assert window.library.graft_action.isEnabled()
    window.library.graft_action.trigger()
    qtbot.waitUntil(lambda: window.workflows.graft.confirmation is not None, timeout=30_000)
    window.workflows.graft.confirmation.button(QMessageBox.StandardButton.Yes).click()

    grafted = models_folder / "demo-trunk-mtp.gguf"
    qtbot.waitUntil(lambda: window.library.selected_model() is not None, timeout=60_000)
    qtbot.waitUntil(lambda: window.library.selected_model().path == grafted, timeout=60_000)
    assert window.jobs.job_at(0).record.spec.kind == "graft"
    assert window.jobs.job_at(0).state.value == "succeeded"
    assert window.library.selected_model().description.mtp_blocks == 1
    assert base.is_file()  # the original stays


@pytest.mark.slow
def test_download_sidecar_opens_the_wizard_on_the_sidecar_repo(
    qtbot, open_window: Callable[[], MainWindow], home: IsolatedHome, tmp_path: Path
) -> None:
    trunk = write_trunk_only(DEMO_GGUF, tmp_path / "trunk.gguf")
    gguf = put_in_cache(home.hub_cache, ENTRY_REPO, "Qwen3.5-27B-Q4_K_M.gguf", trunk)
    window = open_window()
    window.show_page("models")
    qtbot.waitUntil(  # the catalog says which sidecar the model's repo has
        lambda: any(m.mtp.kind == SIDECAR_ON_HUB for m in window.library.models), timeout=30_000
    )
    assert window.library.select(gguf)
    window.library.download_action.trigger()
    wizard = next(w for w in window.open_wizards if isinstance(w, DownloadWizard))
    assert wizard.repo_page.repo_edit.text() == ENTRY_SIDECAR


@pytest.mark.slow
def test_the_model_loaded_in_the_chat_is_not_deleted_under_it(
    qtbot, models_folder: Path, open_window: Callable[[], MainWindow]
) -> None:
    window, base = _trunk_selected(qtbot, open_window(), models_folder)
    window.library.chat_action.trigger()
    chat = window.chat_window
    assert chat is not None
    qtbot.waitUntil(lambda: chat.loaded_model == base, timeout=LOAD_TIMEOUT_MS)
    window.show_page("models")
    assert window.library.select(base)
    window.library.delete_action.trigger()
    assert "is loaded in the chat" in window.library.status.text()
    assert window.library.confirmation is None and base.is_file()
    window.shutdown()
    qtbot.waitUntil(lambda: chat.shut_down, timeout=LOAD_TIMEOUT_MS)
