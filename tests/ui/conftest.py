"""Qt tests: the main window comes from tests/windows.py (owned by each test); a test that applies
a theme gives the application's look back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtWidgets import QApplication


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
