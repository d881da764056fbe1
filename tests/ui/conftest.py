"""Qt tests run offscreen, in isolated folders, against the local test hub."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from collections.abc import Iterator

import pytest

from tests.store.isolation import IsolatedHome, isolate


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> IsolatedHome:
    return isolate(monkeypatch, tmp_path_factory.mktemp("home"))


@pytest.fixture
def main_window(qtbot, home: IsolatedHome) -> Iterator[object]:
    """The app's main window on fresh folders; shut down (jobs stopped, store closed) after."""
    from app.engine.settings import app_dirs
    from app.ui.main_window import MainWindow

    window = MainWindow(app_dirs())
    qtbot.addWidget(window)
    window.show()
    yield window
    window.shutdown()
