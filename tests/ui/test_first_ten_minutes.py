"""The first ten minutes of a new user, driven through the real main window (Qt offscreen).

A window that fits the screen it opens on and pages usable at 1024x640, settings that apply at
once, the mouse wheel scrolling pages instead of changing values, readable tooltips, one meaning
for Ctrl+N, Home's Download opening Discover, Compare's code under its header, and the Server
page picking from the models on disk.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, QPointF, QRect, Qt
from PySide6.QtGui import QColor, QKeySequence, QWheelEvent
from PySide6.QtWidgets import (
    QAbstractSlider,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QScrollBar,
    QToolTip,
    QWidget,
)

from app.engine.chat.conversation import ChatSettings
from app.engine.chat.history import HISTORY_FILE_NAME, HistoryStore
from app.engine.runtime.core.demo_model import demo_model_path
from app.engine.runtime.core.request import GenerationResult
from app.engine.runtime.core.stats import DecodeStats
from app.engine.settings import SettingsStore, app_dirs
from app.ui.chat.bridges.runtime_bridge import RuntimeBridge
from app.ui.chat.controls.compare_dialog import CompareDialog
from app.ui.main_window import MainWindow
from app.ui.shell.window_size import BORDER, FRAME_ALLOWANCE, TITLE_BAR, first_run_geometry
from tests.localhub import LocalHub
from tests.localhub.shaped_repos import GGUF_REPO, seed_shaped_repos

SMALL_SCREEN = QRect(0, 0, 800, 600)


@pytest.mark.parametrize("screen", [(1280, 800), (1024, 640), (800, 600), (1920, 1080)])
def test_a_first_run_takes_a_size_that_fits_the_screen(screen: tuple[int, int]) -> None:
    available = QRect(0, 0, *screen)
    geometry = first_run_geometry(available)
    framed = geometry.adjusted(-BORDER, -TITLE_BAR, BORDER, BORDER)  # with its title bar
    assert available.contains(framed)
    assert (geometry.width(), geometry.height()) == (
        min(1280, screen[0] - FRAME_ALLOWANCE.width()),
        min(820, screen[1] - FRAME_ALLOWANCE.height()),
    )


@pytest.mark.slow
def test_the_window_opens_on_the_screen_and_shrinks_to_800x600(main_window: MainWindow) -> None:
    available = main_window.screen().availableGeometry()
    assert available.contains(main_window.frameGeometry())
    for key in main_window.page_widgets:  # on every page, with the chat built
        main_window.show_page(key)
        minimum = main_window.minimumSizeHint()
        assert minimum.width() <= SMALL_SCREEN.width() - FRAME_ALLOWANCE.width(), key
        assert minimum.height() <= SMALL_SCREEN.height() - FRAME_ALLOWANCE.height(), key


@pytest.mark.slow
def test_every_page_stays_usable_at_1024x640(qtbot, main_window: MainWindow) -> None:
    main_window.resize(1024, 640)
    for key in main_window.page_widgets:
        main_window.show_page(key)
        qtbot.wait(50)
        assert (main_window.width(), main_window.height()) == (1024, 640), key
    main_window.show_page("catalog")  # the entry's detail goes under the tree, whole
    main_window.browser.select_key("qwen3-6-27b-mlx-4bit")
    qtbot.wait(50)
    for button in (main_window.browser.detail.chat_button, main_window.browser.detail.edit_button):
        right = button.mapTo(main_window, button.rect().topRight()).x()
        assert button.isVisible() and right < main_window.width() - 8, button.text()
    chat = main_window.chat_window
    assert chat is not None
    main_window.show_page("chat")
    qtbot.waitUntil(lambda: chat.transcript.width() >= 500)  # the transcript keeps the room
    assert not chat.settings_scroll.isVisible()
    qtbot.mouseClick(chat.model_bar.settings_toggle, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(chat.settings_scroll.isVisible)
    qtbot.wait(50)
    viewport = chat.settings_scroll.viewport().width()
    assert viewport >= chat.settings_panel.minimumSizeHint().width()  # nothing cut on the right
    assert chat.settings_scroll.horizontalScrollBar().maximum() == 0  # nor scrolled sideways
    assert (main_window.width(), main_window.height()) == (1024, 640)


def test_a_hub_saved_in_settings_is_the_one_discover_searches(
    qtbot, local_hub: LocalHub, open_window: Callable[[], MainWindow]
) -> None:
    seed_shaped_repos(local_hub)
    SettingsStore().update(hub_endpoint="http://127.0.0.1:9")  # nothing listens there
    window = open_window()
    dialog = window.open_settings()
    dialog.endpoint_edit.setText(local_hub.endpoint)
    dialog._save()  # the Save button
    assert window.status_line.endpoint_label.text() == f"Hub: {local_hub.endpoint}"

    window.show_page("models")
    window.library.show_discover()
    panel = window.library.discover
    panel.query.setText("MTP")
    panel.search()
    assert panel.status.text() == f"Searching {local_hub.endpoint}…"
    qtbot.waitUntil(lambda: not panel.searching, timeout=20_000)
    assert any(hit_row[0].repo_id == GGUF_REPO for hit_row in panel.results.rows)


def _wheel(widget: QWidget, delta: int) -> None:
    centre = QPointF(widget.rect().center())
    event = QWheelEvent(
        centre,
        QPointF(widget.mapToGlobal(centre.toPoint())),
        QPoint(0, 0),
        QPoint(0, delta),
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    QApplication.sendEvent(widget, event)


def test_the_wheel_scrolls_the_settings_and_leaves_the_draft_depth_alone(
    qtbot, main_window: MainWindow
) -> None:
    main_window.resize(1400, 560)
    chat = main_window.open_chat()
    qtbot.waitUntil(chat.settings_scroll.isVisible)
    depth = chat.settings_panel.mtp_depth
    bar = chat.settings_scroll.verticalScrollBar()
    assert bar.maximum() > 0 and depth.text() == "auto"
    bar.setValue(bar.maximum() // 2)
    before = bar.value()
    _wheel(depth, -120)
    assert depth.text() == "auto"  # the value is left alone…
    assert bar.value() != before  # …and the panel scrolls

    depth.setFocus()  # with the focus, the wheel is the spin box's
    _wheel(depth, 120)
    assert depth.text() == "1"


@pytest.mark.slow
def test_no_value_on_any_page_changes_under_the_wheel_without_focus(
    qtbot, main_window: MainWindow
) -> None:
    def value(widget: QWidget) -> object:
        if isinstance(widget, QAbstractSpinBox):
            return widget.text()
        if isinstance(widget, QComboBox):
            return widget.currentIndex()
        return widget.value()  # type: ignore[attr-defined]

    main_window.open_chat()
    changed = []
    dialogs = [main_window.open_settings(), main_window.publish_sidecar()]
    for page in [*main_window.page_widgets.values(), *dialogs]:
        for widget in page.findChildren(QWidget):
            kinds = (QAbstractSpinBox, QComboBox, QAbstractSlider)
            if not isinstance(widget, kinds) or isinstance(widget, QScrollBar):
                continue
            widget.clearFocus()
            before = value(widget)
            for delta in (120, -120, -120):
                _wheel(widget, delta)
            if value(widget) != before:
                changed.append(f"{type(widget).__name__} {widget.objectName()}")
    assert changed == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.slow
def test_tooltips_read_well(qtbot, main_window: MainWindow, scheme: str) -> None:
    main_window.set_theme(scheme)
    button = main_window.home.demo_button
    QToolTip.showText(button.mapToGlobal(QPoint(4, 4)), "Chat with the demo model", button)
    tip = next(
        widget
        for widget in QApplication.topLevelWidgets()
        if widget.metaObject().className() == "QTipLabel" and widget.isVisible()
    )
    image = tip.grab().toImage()
    colours = {}
    for x in range(image.width()):
        for y in range(image.height()):
            name = image.pixelColor(x, y).name()
            colours[name] = colours.get(name, 0) + 1
    background = QColor(max(colours, key=colours.get))
    text = max((QColor(name) for name in colours), key=lambda c: _contrast(c, background))
    assert _contrast(text, background) >= 4.5, (scheme, background.name(), text.name())
    QToolTip.hideText()


def _contrast(first: QColor, second: QColor) -> float:
    def luminance(colour: QColor) -> float:
        def channel(value: float) -> float:
            return value / 12.92 if value <= 0.03928 else ((value + 0.055) / 1.055) ** 2.4

        return (
            0.2126 * channel(colour.redF())
            + 0.7152 * channel(colour.greenF())
            + 0.0722 * channel(colour.blueF())
        )

    lighter, darker = sorted((luminance(first), luminance(second)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


@pytest.mark.slow
def test_ctrl_n_means_a_new_conversation_on_every_page(qtbot, main_window: MainWindow) -> None:
    chat = main_window.open_chat()
    everyone = [*main_window.findChildren(type(main_window.page_actions["home"])), *chat.actions()]
    new = [a for a in everyone if a.shortcut() == QKeySequence(QKeySequence.StandardKey.New)]
    assert [action.text() for action in new] == ["New &conversation"]

    store = HistoryStore(app_dirs().data / HISTORY_FILE_NAME)
    conversation = store.create_conversation("Earlier", ChatSettings())
    store.add_user_message(conversation, "an earlier question")
    store.close()
    chat.open_conversation(conversation)
    main_window.show_page("catalog")
    main_window.browser.tree.setFocus()
    qtbot.keyClick(main_window.browser.tree, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert main_window.current_page == "chat"
    assert chat.conversation_control.current is None and chat.transcript.messages == []


@pytest.mark.slow
def test_homes_download_a_model_opens_discover(qtbot, main_window: MainWindow) -> None:
    qtbot.mouseClick(main_window.home.download_button, Qt.MouseButton.LeftButton)
    assert main_window.current_page == "models"
    assert main_window.library.discover.isVisible()
    assert main_window.open_wizards == []  # not the raw repository wizard


def test_compares_code_block_sits_under_its_header(qtbot) -> None:
    bridge = RuntimeBridge()
    dialog = CompareDialog(bridge, ChatSettings(), ())
    qtbot.addWidget(dialog)
    dialog.show()
    answer = "Here it is:\n\n```python\ndef reverse(text):\n    return text[::-1]\n```\n"
    stats = _plain_stats()
    dialog.mtp.finish(GenerationResult(answer, (), 10, "stop", stats, seed=1))
    qtbot.wait(100)
    [block] = dialog.mtp.body.code_blocks
    header_bottom = block.copy_button.geometry().bottom()
    assert block.view.geometry().top() - header_bottom <= 8
    bridge.shutdown()


def _plain_stats() -> DecodeStats:
    return DecodeStats("ar", 0, 10, 12, 0, (), (), 0.01, 0.02, 0.3, 0.0, 0, 0.0, 0)


def test_the_server_page_picks_from_the_models_on_disk(
    qtbot, main_window: MainWindow, tmp_path: Path
) -> None:
    mine = tmp_path / "my-model.gguf"
    shutil.copyfile(demo_model_path(), mine)
    main_window.history.remember_model(mine)
    main_window.library.refresh()
    panel = main_window.server_panel
    qtbot.waitUntil(lambda: panel.model_picker.findData(str(mine)) >= 0, timeout=30_000)
    assert panel.serves_library and panel.model_path() is None  # every model on disk: default
    assert panel.model_picker.findData(str(demo_model_path())) >= 0  # the demo can be pinned
    panel.choose_model(mine)
    assert panel.model_path() == mine and panel.model_picker.currentText() == "my-model.gguf"
