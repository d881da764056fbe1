"""A page of the main window: its title and one line on what it is for, then its content.

Pages built by the main window (Catalog, Jobs, Server) share this frame so their headings line
up with Home's and Models', which draw the same heading themselves. A body taller than a small
screen (the Server page's log, loaded models and clients) scrolls instead of growing the window.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QScrollArea, QVBoxLayout, QWidget

PAGE_MARGINS = (20, 16, 20, 8)


def frame_page(
    page: QWidget,
    title: str,
    subtitle: str,
    body: QWidget,
    actions: list[QWidget] | None = None,
) -> None:
    """Lay ``page`` out: ``title`` and ``subtitle`` (``actions`` beside them), then ``body``."""
    heading = QLabel(title)
    heading.setObjectName("pageTitle")
    about = QLabel(subtitle)
    about.setObjectName("pageSubtitle")
    about.setWordWrap(True)
    titles = QVBoxLayout()
    titles.setSpacing(2)
    titles.addWidget(heading)
    titles.addWidget(about)
    header = QHBoxLayout()
    header.addLayout(titles, 1)
    for action in actions or []:
        header.addWidget(action, 0, Qt.AlignmentFlag.AlignBottom)
    layout = QVBoxLayout(page)
    layout.setContentsMargins(*PAGE_MARGINS)
    layout.setSpacing(12)
    layout.addLayout(header)
    layout.addWidget(body, 1)


def titled_page(
    title: str, subtitle: str, body: QWidget, actions: list[QWidget] | None = None
) -> QWidget:
    """A new page framed by :func:`frame_page`."""
    page = QWidget()
    frame_page(page, title, subtitle, body, actions)
    return page


def scrolled(body: QWidget) -> QScrollArea:
    """``body`` in a frameless vertical scroll area, so its minimum height never sets the
    window's."""
    scroll = QScrollArea()
    scroll.setWidgetResizable(True)
    scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    scroll.setFrameShape(QFrame.Shape.NoFrame)
    scroll.setWidget(body)
    return scroll
