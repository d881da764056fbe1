"""The chat is the main window's Chat page: the sidebar, View → Chat, the Models menu
(Ctrl+Shift+C) and the detail pane's Chat button, which opens it on the selected entry's
downloaded model."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.ui.main_window import MainWindow
from tests.chat.hub_cache import put_in_cache
from tests.store.isolation import IsolatedHome

ENTRY = "qwen3-5-27b-gguf-q4-k-m"
ENTRY_REPO = "mtp-studio/Qwen3.5-27B-Q4_K_M-GGUF"


def test_the_models_menu_opens_the_chat_page(qtbot, main_window: MainWindow) -> None:
    assert main_window.chat_window is None or not main_window.chat_window.started
    models_menu = next(
        action.menu() for action in main_window.menuBar().actions() if action.text() == "&Models"
    )
    chat_action = next(a for a in models_menu.actions() if a.text() == "&Chat…")
    assert chat_action.shortcut().toString() == "Ctrl+Shift+C"
    chat_action.trigger()
    chat = main_window.chat_window
    assert chat is not None and chat.isVisible() and not chat.isWindow()  # a page, not a window
    assert chat.started  # shown: it looks for models and loads the preferred one
    assert main_window.current_page == "chat"
    main_window.show_page("catalog")
    assert not chat.isVisible()
    main_window.sidebar.select("chat")  # the sidebar row
    assert main_window.chat_window is chat and chat.isVisible()  # one chat, kept


def test_chat_on_an_entry_that_is_not_downloaded_says_so(qtbot, main_window: MainWindow) -> None:
    main_window.browser.select_key(ENTRY)
    button = main_window.browser.detail.chat_button
    assert button.isEnabled()
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    chat = main_window.chat_window
    assert chat is not None and chat.banner.isVisible()
    assert f"{ENTRY_REPO} is not downloaded yet" in chat.banner.text()


@pytest.mark.slow
def test_chat_on_a_downloaded_entry_loads_its_model(
    qtbot, main_window: MainWindow, home: IsolatedHome, tiny_gguf: Path
) -> None:
    put_in_cache(home.hub_cache, ENTRY_REPO, "Qwen3.5-27B-Q4_K_M.gguf", tiny_gguf)
    main_window.browser.select_key(ENTRY)
    qtbot.mouseClick(main_window.browser.detail.chat_button, Qt.MouseButton.LeftButton)
    chat = main_window.chat_window
    assert chat is not None
    qtbot.waitUntil(
        lambda: chat.model_bar.state.text() == "Ready: Qwen3.5-27B-Q4_K_M.gguf", timeout=60_000
    )
    assert chat.model_bar.picker.currentText().startswith(f"Downloaded: {ENTRY_REPO} · ")
