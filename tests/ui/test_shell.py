"""The one-window shell as a user meets it: a first run opens on Home, every page is one click or
one shortcut away, the demo chat starts from Home, and the window comes back as it was left."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication, QLabel, QMessageBox

from app.engine.runtime.core.demo_model import DEMO_VISION_MODEL
from app.engine.settings import SettingsStore
from app.ui.main_window import MainWindow
from app.ui.shell.home import MTP_EXPLAINED
from app.ui.shell.pages import PAGES

LOAD_TIMEOUT_MS = 60_000


def _visible_message_boxes() -> list[QMessageBox]:
    return [
        w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox) and w.isVisible()
    ]


@pytest.mark.slow
def test_a_first_run_opens_on_home_and_asks_nothing(qtbot, main_window: MainWindow) -> None:
    assert main_window.current_page == "home" and main_window.home.isVisible()
    texts = [label.text() for label in main_window.home.findChildren(QLabel)]
    assert "Welcome to MTP Studio" in texts and MTP_EXPLAINED in texts
    assert main_window.home.demo_button.isVisible()
    assert main_window.home.conversations.item(0).text() == "No conversations yet."
    assert main_window.home.recent_jobs.item(0).text() == "No jobs yet."
    assert "Not signed in" in main_window.home.account.text()
    assert not _visible_message_boxes()  # no dialog storm on a first run
    qtbot.waitUntil(lambda: main_window.chat_window is not None)  # built while idle...
    qtbot.wait(500)
    assert not main_window.chat_window.started  # ...but no models scan or worker until shown
    assert main_window.chat_window.loaded_model is None


def test_every_page_is_in_the_sidebar_and_the_view_menu_with_a_shortcut(
    main_window: MainWindow,
) -> None:
    titles = [main_window.sidebar.list.item(row).text() for row in range(len(PAGES))]
    assert titles == ["Home", "Models", "Catalog", "Chat", "Jobs", "Server"][: len(PAGES)]
    for spec in PAGES:
        if spec.key == "chat":
            continue  # opened in test_the_demo_chat_starts_from_home
        action = main_window.page_actions[spec.key]
        assert action.shortcut().toString() == spec.shortcut
        action.trigger()
        assert main_window.current_page == spec.key
        assert main_window.pages.currentWidget() is main_window.page_widgets[spec.key]
        assert main_window.page_widgets[spec.key].isVisible()
    main_window.sidebar.list.setCurrentRow(0)  # a click on the first row
    assert main_window.current_page == "home"


@pytest.mark.slow
def test_the_window_comes_back_as_it_was_left(open_window: Callable[[], MainWindow]) -> None:
    first = open_window()
    first.resize(790, 560)  # inside the offscreen screen (800×600): Qt keeps windows on screen
    first.show_page("jobs")
    first.monitor.splitter.setSizes([100, 300])
    top, bottom = first.monitor.splitter.sizes()
    first.shutdown()

    second = open_window()
    assert second.current_page == "jobs" and second.monitor.isVisible()
    assert (second.width(), second.height()) == (790, 560)
    restored_top, restored_bottom = second.monitor.splitter.sizes()
    assert abs(restored_top - top) <= 4 and abs(restored_bottom - bottom) <= 4  # a handle's width


@pytest.mark.slow
def test_the_demo_chat_starts_from_home_and_comes_back_in_recent(
    qtbot, main_window: MainWindow
) -> None:
    qtbot.mouseClick(main_window.home.demo_button, Qt.MouseButton.LeftButton)
    chat = main_window.chat_window
    assert chat is not None and main_window.current_page == "chat" and chat.isVisible()
    qtbot.waitUntil(
        lambda: chat.model_bar.state.text() == "Ready: demo-mtp.gguf", timeout=LOAD_TIMEOUT_MS
    )
    # The vision demo is offered too (pictures offline), but the first chat is the text demo.
    qtbot.waitUntil(lambda: DEMO_VISION_MODEL in [m.path for m in chat.model_bar.models])
    assert chat.loaded_model is not None and chat.loaded_model.name == "demo-mtp.gguf"
    chat.settings_panel.temperature.setValue(0.0)
    chat.settings_panel.max_tokens.setValue(16)
    chat.composer.editor.setPlainText("Hello from Home")
    qtbot.mouseClick(chat.composer.send_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not chat.streaming, timeout=LOAD_TIMEOUT_MS)
    conversation_id = chat.conversations.current_id

    # Ctrl+N belongs to the page with the focus: a new conversation here, not a new catalog.
    main_window.activateWindow()
    qtbot.waitUntil(main_window.isActiveWindow)
    chat.composer.editor.setFocus()
    qtbot.keyClick(chat.composer.editor, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert chat.transcript.messages == [] and not _visible_message_boxes()

    main_window.show_page("home")
    recent = main_window.home.conversations
    qtbot.waitUntil(lambda: recent.item(0).text().startswith("Hello from Home"), timeout=10_000)
    recent.itemActivated.emit(recent.item(0))
    assert main_window.current_page == "chat"
    assert chat.conversations.current_id == conversation_id
    assert chat.transcript.messages[0].text == "Hello from Home"

    dialog = main_window.show_shortcuts()
    rows = {
        tuple(dialog.table.item(row, column).text() for column in range(3))
        for row in range(dialog.table.rowCount())
    }
    assert ("Pages", "Home", "Ctrl+1") in rows and ("Pages", "Chat", "Ctrl+4") in rows
    assert ("File", "New conversation", "Ctrl+N") in rows
    assert [row for row in rows if row[2] == "Ctrl+N"] == [("File", "New conversation", "Ctrl+N")]
    assert ("View", "Toggle dark mode", "Ctrl+Shift+D") in rows
    assert ("Chat", "Send the message", "Enter") in rows
    main_window.shutdown()
    qtbot.waitUntil(lambda: chat.shut_down, timeout=LOAD_TIMEOUT_MS)


@pytest.mark.slow
def test_the_dark_toggle_switches_the_look_and_is_kept(
    open_window: Callable[[], MainWindow],
) -> None:
    window = open_window()
    window.set_theme("light")
    light_window = QApplication.palette().color(QPalette.ColorRole.Window).lightness()
    window.sidebar.theme_button.click()
    assert window.themes.scheme == "dark"
    assert QApplication.palette().color(QPalette.ColorRole.Window).lightness() < light_window
    assert window.sidebar.theme_button.text() == "Light mode"
    checked = [a.data() for a in window.theme_actions.actions() if a.isChecked()]
    assert checked == ["dark"]
    window.shutdown()

    again = open_window()  # the choice is a setting: the next run starts dark
    assert again.themes.choice == "dark" and again.themes.scheme == "dark"
    assert SettingsStore().load().theme == "dark"
    again.set_theme("system")


SMALL_SCREEN_WIDTH = 800


@pytest.mark.slow
def test_the_chat_page_fits_an_800_px_screen_while_and_after_a_model_loads(
    qtbot, main_window: MainWindow
) -> None:
    """The window's minimum width (what it grows to, and never shrinks back from) stays within
    an 800-px screen on the Chat page in every state of the model bar: before, while and
    after the demo model loads."""
    widths = []

    def record() -> bool:
        widths.append(main_window.minimumSizeHint().width())
        return False

    qtbot.mouseClick(main_window.home.demo_button, Qt.MouseButton.LeftButton)
    chat = main_window.chat_window
    qtbot.waitUntil(lambda: chat.model_bar.busy.isVisible() or record(), timeout=LOAD_TIMEOUT_MS)
    record()  # loading: the busy bar is shown
    qtbot.waitUntil(
        lambda: record() or chat.model_bar.state.text() == "Ready: demo-mtp.gguf",
        timeout=LOAD_TIMEOUT_MS,
    )
    record()
    assert max(widths) <= SMALL_SCREEN_WIDTH, widths
    main_window.shutdown()
    qtbot.waitUntil(lambda: chat.shut_down, timeout=LOAD_TIMEOUT_MS)
