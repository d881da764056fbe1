"""Where the user types: Enter sends, Shift+Enter starts a new line, Stop ends a reply, and Tab
moves the focus on (to the buttons), as in a web chat, instead of typing a tab character that
left the keyboard no way out of the box.

While a reply streams, Send becomes Stop (Esc too); the text box stays editable so the next
message can be typed meanwhile.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QHBoxLayout,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

MIN_LINES = 2
MAX_LINES = 8


class _MessageEdit(QPlainTextEdit):
    """Grows with its text from two lines to eight, then scrolls, so an empty box leaves the
    transcript its room on a small screen."""

    submitted = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().documentLayout().documentSizeChanged.connect(lambda _size: self._fit())
        self._fit()

    def _fit(self) -> None:
        lines = max(MIN_LINES, min(MAX_LINES, int(self.document().size().height())))
        frame = self.frameWidth() * 2 + int(self.document().documentMargin() * 2)
        margins = self.contentsMargins().top() + self.contentsMargins().bottom()
        self.setFixedHeight(lines * self.fontMetrics().lineSpacing() + frame + margins + 4)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.submitted.emit()
            return
        super().keyPressEvent(event)


class Composer(QWidget):
    send_requested = Signal(str)
    stop_requested = Signal()
    compare_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.editor = _MessageEdit()
        self.editor.setObjectName("composer")
        self.editor.setTabChangesFocus(True)  # Tab moves on to Send; a message needs no tabs
        self.editor.setPlaceholderText("Message the model — Enter sends, Shift+Enter adds a line")
        self.editor.submitted.connect(self._send)
        self.send_button = QPushButton("Send")
        self.send_button.setDefault(True)
        self.send_button.clicked.connect(self._send)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip("Stop the reply (Esc); the text so far is kept")
        self.stop_button.clicked.connect(self.stop_requested.emit)
        self.stop_button.hide()
        self.compare_button = QPushButton("Compare plain vs MTP…")
        self.compare_button.setToolTip(
            "Answer this message twice, with plain decoding and with MTP (same seed), side by side"
        )
        self.compare_button.clicked.connect(
            lambda: self.compare_requested.emit(self.editor.toPlainText().strip())
        )
        QShortcut(QKeySequence(Qt.Key.Key_Escape), self, self.stop_requested.emit)
        self._streaming = False

        buttons = QHBoxLayout()
        buttons.addWidget(self.compare_button)
        buttons.addStretch(1)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(self.send_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 0, 12, 8)
        layout.addWidget(self.editor)
        layout.addLayout(buttons)

    def set_streaming(self, streaming: bool) -> None:
        self._streaming = streaming
        self.stop_button.setVisible(streaming)
        self.send_button.setVisible(not streaming)
        self.compare_button.setEnabled(not streaming)

    def _send(self) -> None:
        """Ask to send; the window clears the text once it accepted the message."""
        text = self.editor.toPlainText().strip()
        if not self._streaming and text:
            self.send_requested.emit(text)
