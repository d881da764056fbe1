"""Windows a test opens are the test's: shut down, closed and deleted when it ends.

Why this module: a window left alive keeps its widgets, timers and signal connections, and
every later test pays for them (a theme switch restyles every live widget; a leaked theme
manager follows the OS scheme forever). pytest-qt's ``qtbot.addWidget(w, before_close_func=…)``
gives each window to the test: at its end the window is shut down (jobs stopped, job store and
history closed, its chat worker stopped), closed and ``deleteLater``-ed; the autouse
:func:`deleted_widgets_released` then gives Qt the event-loop turn that actually deletes it.

Fixtures: :func:`open_window` (as many main windows as a "restart" needs) and
:func:`main_window` (one). Qt is imported only when a fixture runs, so tests without widgets do
not load it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

from tests.store.isolation import IsolatedHome

if TYPE_CHECKING:
    from app.engine.settings import AppDirs
    from app.ui.main_window import MainWindow

SHUTDOWN_TIMEOUT_MS = 60_000


def release_deleted_widgets() -> None:
    """Delete the objects ``deleteLater`` was called on (outside an event loop, Qt keeps them
    until a loop runs; ``processEvents`` alone does not delete them)."""
    widgets = sys.modules.get("PySide6.QtWidgets")
    if widgets is None or widgets.QApplication.instance() is None:
        return
    from PySide6.QtCore import QEvent

    widgets.QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


@pytest.fixture(autouse=True)
def deleted_widgets_released() -> Iterator[None]:
    """After every test (its fixtures' teardown included), delete what it handed to Qt."""
    yield
    release_deleted_widgets()


@pytest.fixture
def open_window(qtbot, home: IsolatedHome) -> Callable[..., MainWindow]:
    """Opens main windows on the test's folders (or on ``dirs``), each owned by the test."""
    from app.engine.settings import app_dirs
    from app.ui.main_window import MainWindow

    opened: list[MainWindow] = []  # kept alive until the test ends and closes them

    def shut_down(window: MainWindow) -> None:
        chat = window.chat_window
        window.shutdown()  # before close: closing a window with work in it would ask to confirm
        if chat is not None:
            qtbot.waitUntil(lambda: chat.shut_down, timeout=SHUTDOWN_TIMEOUT_MS)

    def open_one(dirs: AppDirs | None = None) -> MainWindow:
        window = MainWindow(dirs or app_dirs())
        qtbot.addWidget(window, before_close_func=shut_down)
        window.show()
        opened.append(window)
        return window

    return open_one


@pytest.fixture
def main_window(open_window: Callable[..., MainWindow]) -> MainWindow:
    """The app's main window on fresh folders (the bundled catalog, default settings)."""
    return open_window()
