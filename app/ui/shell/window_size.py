"""The main window's size on a first run: the preferred size, or less where the screen is smaller.

A window must fit the screen it opens on, title bar and status bar included: on a 1280x800
laptop a fixed 1280x820 put the status bar and the theme toggle below the screen's edge. So a
first run takes the preferred size where there is room and otherwise the screen's free area, less
an allowance for the window frame, and sits in the middle of it. Once shown, a window whose frame
still overhangs the free area (a frame taller than the allowance) is moved and shrunk to fit. A
size the user chose is restored as saved (:mod:`app.ui.shell.window_state`).
"""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize
from PySide6.QtWidgets import QWidget

PREFERRED = QSize(1280, 820)
TITLE_BAR = 40
BORDER = 8
FRAME_ALLOWANCE = QSize(2 * BORDER, TITLE_BAR + BORDER)
"""Room left for the window manager's title bar and borders (the real frame is known once the
window is shown)."""


def first_run_geometry(available: QRect) -> QRect:
    """The window's own area (frame excluded) on a screen whose free area is ``available``:
    the frame around it is centred in ``available`` and fits it."""
    width = min(PREFERRED.width(), available.width() - FRAME_ALLOWANCE.width())
    height = min(PREFERRED.height(), available.height() - FRAME_ALLOWANCE.height())
    frame = QRect(0, 0, width + FRAME_ALLOWANCE.width(), height + FRAME_ALLOWANCE.height())
    frame.moveCenter(available.center())
    return frame.adjusted(BORDER, TITLE_BAR, -BORDER, -BORDER)


def place_first_run(window: QWidget) -> None:
    """Size and centre ``window`` for its screen (before it is shown)."""
    screen = window.screen()
    if screen is not None:
        window.setGeometry(first_run_geometry(screen.availableGeometry()))


def keep_on_screen(window: QWidget) -> None:
    """Shrink and move a shown ``window`` whose frame overhangs its screen's free area."""
    screen = window.screen()
    if screen is None or window.isMaximized() or window.isFullScreen():
        return
    available = screen.availableGeometry()
    frame = window.frameGeometry()
    if available.contains(frame):
        return
    extra = frame.size() - window.size()  # the real frame, now that the window is shown
    size = window.size().boundedTo(available.size() - extra).expandedTo(window.minimumSize())
    window.resize(size)
    frame = window.frameGeometry()
    left = min(max(frame.left(), available.left()), available.right() - frame.width() + 1)
    top = min(max(frame.top(), available.top()), available.bottom() - frame.height() + 1)
    window.move(left, top)
