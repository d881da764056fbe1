"""The chat's banner: the one place a problem shows beside the conversation, which stays intact.

A load failure, a server that cannot be reached, a model that cannot run, a history that could
not be opened: each says its cause and fix here, under the transcript, until the next action
clears it. Every part of the chat page writes to the same banner, so two problems never stack.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget

BANNER_STYLE = (
    "QLabel { background: rgba(176, 0, 32, 0.08); border: 1px solid rgba(176, 0, 32, 0.4);"
    " border-radius: 4px; padding: 6px; }"
)


class Banner(QLabel):
    """A selectable, word-wrapped notice, hidden while it has nothing to say."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatBanner")
        self.setWordWrap(True)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.setStyleSheet(BANNER_STYLE)
        self.hide()

    def show_text(self, text: str) -> None:
        """Say ``text`` (an empty text hides the banner)."""
        self.setText(text)
        self.setVisible(bool(text))
