"""A splitter that puts its two panes side by side where they fit, and one above the other where
they do not.

The Catalog page's tree and the selected entry's detail need about 900 px side by side; on a
1024x640 screen (840 px for the page) the detail's buttons were cut off on the right. Stacked,
each gets the page's whole width. The splitter asks only for its widest pane's width, so its
panes never stop the window from shrinking to a small screen; it turns as its width changes.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QSplitter, QWidget


class ResponsiveSplitter(QSplitter):
    """Horizontal at ``side_by_side_from`` pixels and wider, vertical below."""

    def __init__(self, side_by_side_from: int, parent: QWidget | None = None) -> None:
        super().__init__(Qt.Orientation.Horizontal, parent)
        self.side_by_side_from = side_by_side_from

    def minimumSizeHint(self) -> QSize:
        hints = [self.widget(i).minimumSizeHint() for i in range(self.count())]
        if not hints:
            return super().minimumSizeHint()
        return QSize(max(h.width() for h in hints), max(h.height() for h in hints))

    def resizeEvent(self, event: QResizeEvent) -> None:
        wanted = (
            Qt.Orientation.Horizontal
            if event.size().width() >= self.side_by_side_from
            else Qt.Orientation.Vertical
        )
        if wanted != self.orientation():
            self.setOrientation(wanted)
        super().resizeEvent(event)
