"""What the user arranged, kept between runs: window size and place, the page, splitter sizes.

Stored with ``QSettings`` in an INI file in the app's config folder (Qt writes it atomically and
ignores what it cannot read, so a damaged file costs the layout, never the start). Geometry is
restored through ``restoreGeometry``, which puts a window saved on a screen that is gone back on
a visible one. Nothing is saved until the window closes, so a first run opens on the defaults.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings
from PySide6.QtWidgets import QMainWindow, QSplitter

GEOMETRY = "window/geometry"
PAGE = "window/page"
SPLITTER = "splitters/{}"


class WindowState:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._settings = QSettings(str(path), QSettings.Format.IniFormat)

    def has_geometry(self) -> bool:
        """Whether a window size and place were saved (False on a first run)."""
        return isinstance(self._settings.value(GEOMETRY), QByteArray)

    def restore(self, window: QMainWindow, splitters: dict[str, QSplitter]) -> str:
        """Restore geometry and splitters; return the saved page ("" when none was saved)."""
        geometry = self._settings.value(GEOMETRY)
        if isinstance(geometry, QByteArray):
            window.restoreGeometry(geometry)
        self.restore_splitters(splitters)
        page = self._settings.value(PAGE, "")
        return page if isinstance(page, str) else ""

    def restore_splitters(self, splitters: dict[str, QSplitter]) -> None:
        """Restore the saved sizes of ``splitters`` (those created later restore when they are)."""
        for name, splitter in splitters.items():
            state = self._settings.value(SPLITTER.format(name))
            if isinstance(state, QByteArray):
                splitter.restoreState(state)

    def save(self, window: QMainWindow, page: str, splitters: dict[str, QSplitter]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._settings.setValue(GEOMETRY, window.saveGeometry())
        self._settings.setValue(PAGE, page)
        for name, splitter in splitters.items():
            self._settings.setValue(SPLITTER.format(name), splitter.saveState())
        self._settings.sync()
