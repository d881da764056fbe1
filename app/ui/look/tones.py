"""Status colours (error, warning, success, muted) for the scheme on screen, for text that is
coloured where it is written: table foreground brushes and rich-text spans.

Labels that are wholly one tone use the stylesheet's ``QLabel[tone=…]`` hook instead; this is
for the places a style sheet cannot reach. The colours come from the scheme's table
(:mod:`app.ui.look.colors`), chosen to stay readable on both the light and the dark background.
"""

from __future__ import annotations

from typing import Literal

from PySide6.QtGui import QColor, QGuiApplication, QPalette

from app.ui.look.colors import SCHEMES

Tone = Literal["error", "warning", "success", "muted"]


def tone_color(tone: Tone) -> str:
    """``#rrggbb`` of ``tone`` in the scheme the application's palette shows now."""
    window = QGuiApplication.palette().color(QPalette.ColorRole.Window)
    colors = SCHEMES["dark" if window.lightnessF() < 0.5 else "light"]
    return colors.placeholder if tone == "muted" else getattr(colors, tone)


def tone_qcolor(tone: Tone) -> QColor:
    return QColor(tone_color(tone))


def tone_style(tone: Tone) -> str:
    """A ``color: …`` declaration, for a label's style sheet or a span's style attribute."""
    return f"color: {tone_color(tone)}"
