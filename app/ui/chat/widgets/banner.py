"""The chat's banner: the one place a problem shows beside the conversation, which stays intact.

A load failure, a server that cannot be reached, a model that cannot run, a history that could
not be opened: each says its cause and fix here, under the transcript, until the next action
clears it. Every part of the chat page writes to the same banner, so two problems never stack.

A problem is said in one line (the message's first, cut at :data:`SUMMARY_CHARS`); the rest —
a backend's full text can list dozens of tensor names — is folded away under **Details**, in a
scrolling box of bounded height. So a long message never makes the banner (and with it the main
window, which grows to its content's minimum height and never shrinks back) taller than a few
lines. A problem with a way forward carries buttons for it and a hint (:meth:`Banner.add_action`,
:meth:`Banner.set_hint`).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.ui.wording import in_window_words

BANNER_STYLE = (
    "QFrame#chatBanner { background: rgba(176, 0, 32, 0.08);"
    " border: 1px solid rgba(176, 0, 32, 0.4); border-radius: 4px; }"
)
SUMMARY_CHARS = 220
"""A first line longer than this is cut (with "…"); the whole text is under Details."""
DETAILS_HEIGHT = 160
"""The unfolded Details box scrolls beyond this many pixels."""


def split_message(text: str) -> tuple[str, str]:
    """(the one line shown, what goes under Details: "" when the line says it all)."""
    first, _, rest = text.strip().partition("\n")
    first = first.strip()
    if len(first) > SUMMARY_CHARS:
        return first[: SUMMARY_CHARS - 1].rstrip() + "…", text.strip()
    return first, rest.strip()


class Banner(QFrame):
    """A one-line notice with optional actions and folded details, hidden while it has
    nothing to say."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatBanner")
        self.setStyleSheet(BANNER_STYLE)
        self._text = ""
        self._actions: list[QPushButton] = []
        self.summary = QLabel()
        self.summary.setObjectName("bannerSummary")
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.PlainText)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.summary.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.details_button = QToolButton()
        self.details_button.setObjectName("bannerDetailsButton")
        self.details_button.setCheckable(True)
        self.details_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.details_button.setArrowType(Qt.ArrowType.RightArrow)
        self.details_button.setText("Details")
        self.details_button.toggled.connect(self._show_details)
        self.details = QPlainTextEdit()
        self.details.setObjectName("bannerDetails")
        self.details.setReadOnly(True)
        self.details.setMaximumHeight(DETAILS_HEIGHT)
        self.details.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.details.hide()
        self.hint = QLabel()
        self.hint.setObjectName("muted")
        self.hint.setWordWrap(True)
        self.hint.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.hint.hide()

        top = QHBoxLayout()
        top.addWidget(self.summary, 1)
        top.addWidget(self.details_button, 0, Qt.AlignmentFlag.AlignTop)
        self._action_row = QHBoxLayout()
        self._action_row.addWidget(self.hint, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 4)
        layout.setSpacing(4)
        layout.addLayout(top)
        layout.addLayout(self._action_row)
        layout.addWidget(self.details)
        self.hide()

    def text(self) -> str:
        """The whole message, as it was given (the line shown and the details)."""
        return self._text

    def show_text(self, text: str) -> None:
        """Say ``text``: its first line, the rest under Details (an empty text hides the
        banner). Actions and the hint of an earlier message are removed; the message already
        shown, said again (a Send with no model loaded repeats the load failure), keeps them."""
        text = in_window_words(text)
        if text and text == self._text and self.isVisible():
            return
        self._text = text
        summary, details = split_message(text)
        self.summary.setText(summary)
        self.details.setPlainText(details)
        self.details_button.setVisible(bool(details))
        self.details_button.setChecked(False)
        self._clear_actions()
        self.setVisible(bool(text))

    def add_action(self, text: str, slot: Callable[[], None], tooltip: str = "") -> QPushButton:
        """A button under the line that does what fixes the problem (gone with the message)."""
        button = QPushButton(text)
        button.setToolTip(tooltip)
        button.clicked.connect(lambda _checked=False: slot())
        self._action_row.insertWidget(len(self._actions), button)
        button.show()  # now, not when the layout gets to it (an event-loop turn later)
        self._actions.append(button)
        return button

    def set_hint(self, text: str) -> None:
        """A muted line beside the actions: another way forward (gone with the message)."""
        self.hint.setText(text)
        self.hint.setVisible(bool(text))

    @property
    def actions_shown(self) -> list[QPushButton]:
        return list(self._actions)

    def _clear_actions(self) -> None:
        for button in self._actions:
            self._action_row.removeWidget(button)
            button.deleteLater()
        self._actions = []
        self.set_hint("")

    def _show_details(self, shown: bool) -> None:
        self.details.setVisible(shown)
        self.details_button.setArrowType(
            Qt.ArrowType.DownArrow if shown else Qt.ArrowType.RightArrow
        )
