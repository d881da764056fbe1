"""Qt tests run offscreen, in isolated folders, against the local test hub."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from collections.abc import Callable, Iterator

import pytest
from PySide6.QtWidgets import QApplication

from app.ui.main_window import MainWindow
from tests.store.isolation import IsolatedHome, isolate


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> IsolatedHome:
    return isolate(monkeypatch, tmp_path_factory.mktemp("home"))


@pytest.fixture
def open_window(qtbot, home: IsolatedHome) -> Iterator[Callable[[], MainWindow]]:
    """Opens main windows on the test's folders (as many as a "restart" needs); each one is
    shut down (jobs stopped, job store closed) at the end."""
    from app.engine.settings import app_dirs

    opened: list[MainWindow] = []

    def open_one() -> MainWindow:
        window = MainWindow(app_dirs())  # not qtbot.addWidget: it would close before shutdown
        window.show()
        opened.append(window)
        return window

    yield open_one
    for window in opened:
        window.shutdown()
        window.close()
        window.deleteLater()


@pytest.fixture
def main_window(open_window: Callable[[], MainWindow]) -> MainWindow:
    """The app's main window on fresh folders (the bundled catalog, default settings)."""
    return open_window()


@pytest.fixture
def restored_look(qapp) -> Iterator[QApplication]:
    """The application, given back with the style, palette, font, stylesheet and colour-scheme
    hint it had, so a test that applies a theme leaves the next test Qt's defaults."""
    from PySide6.QtGui import QGuiApplication

    style, palette, font, sheet = (
        qapp.style().name(),
        qapp.palette(),
        qapp.font(),
        qapp.styleSheet(),
    )
    yield qapp
    qapp.setStyleSheet(sheet)
    qapp.setStyle(style)
    qapp.setPalette(palette)
    qapp.setFont(font)
    QGuiApplication.styleHints().unsetColorScheme()
