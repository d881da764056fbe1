"""A read-only text view as tall as its text: the base of a reply's prose and code views.

Replies live in a scrolling transcript, so their views never scroll themselves: each one has
no frame and no scroll bars, wraps its lines, and sets its own height to its document's height
whenever its text or its width changes.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QFrame, QSizePolicy, QTextBrowser, QWidget


class FittedTextView(QTextBrowser):
    def __init__(self, parent: QWidget | None = None, *, margin: int) -> None:
        super().__init__(parent)
        self.setProperty("fitted", True)  # the stylesheet draws it without the inputs' border
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.viewport().setAutoFillBackground(False)
        self.document().setDocumentMargin(margin)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self.fit_height()

    def sizeHint(self) -> QSize:
        return QSize(super().sizeHint().width(), self.height())

    def fit_height(self) -> None:
        """Set the height to the document's at the current width (after a text change)."""
        document = self.document()
        document.setTextWidth(self.viewport().width())
        height = int(document.size().height()) + 2 * self.frameWidth() + 2
        if height != self.height():
            self.setFixedHeight(height)
