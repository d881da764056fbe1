"""Where the user types: Enter sends, Shift+Enter starts a new line, Stop ends a reply, and Tab
moves the focus on (to the buttons), as in a web chat, instead of typing a tab character that
left the keyboard no way out of the box.

While a reply streams, Send becomes Stop (Esc too); the text box stays editable so the next
message can be typed meanwhile.

Pictures go with the next message: **Attach pictures…** (``attach_requested``), a picture pasted
into the box or a file dropped on it (``pictures_offered``, see
:mod:`~app.ui.chat.widgets.picture_offer`). Those read so far wait above the box as thumbnails,
each with a × (:attr:`Composer.attachments`); a message may be pictures alone. A model that
reads no pictures disables the button, with the reason as its tooltip.
"""

from __future__ import annotations

from PySide6.QtCore import QMimeData, Qt, Signal
from PySide6.QtGui import QKeyEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QHBoxLayout,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.ui.chat.widgets.picture_offer import picture_offer
from app.ui.icons import icon
from app.ui.picture_tiles import PictureTiles
from app.ui.thumbnails import Thumbnails

MIN_LINES = 2
MAX_LINES = 8
PENDING_SIDE = 64
"""The side of a waiting attachment's thumbnail, in pixels."""
ATTACH_TIP = (
    "Attach PNG, JPEG or WebP pictures to the next message (or drop them on the window, or "
    "paste one with Ctrl+V)"
)


class _MessageEdit(QPlainTextEdit):
    """Grows with its text from two lines to eight, then scrolls, so an empty box leaves the
    transcript its room on a small screen."""

    submitted = Signal()
    pictures_offered = Signal(object)
    """A paste or a drop into the box offered pictures (a :class:`PictureOffer`)."""

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

    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        return picture_offer(source) is not None or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:
        offer = picture_offer(source)
        if offer is None:
            super().insertFromMimeData(source)
        else:
            self.pictures_offered.emit(offer)


class Composer(QWidget):
    send_requested = Signal(str)
    """Send the text (maybe empty, when pictures are attached) with :attr:`attachments`."""
    stop_requested = Signal()
    compare_requested = Signal(str)
    attach_requested = Signal()
    pictures_offered = Signal(object)

    def __init__(self, thumbnails: Thumbnails, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.attachments = PictureTiles(thumbnails, PENDING_SIDE, removable=True)
        self.attachments.setObjectName("pendingPictures")
        self.attach_button = QToolButton()
        self.attach_button.setObjectName("attachButton")
        self.attach_button.setIcon(icon("image"))
        self.attach_button.setText("Attach pictures…")
        self.attach_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.attach_button.setToolTip(ATTACH_TIP)
        self.attach_button.clicked.connect(self.attach_requested.emit)
        self.editor = _MessageEdit()
        self.editor.pictures_offered.connect(self.pictures_offered.emit)
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
        buttons.addWidget(self.attach_button)
        buttons.addWidget(self.compare_button)
        buttons.addStretch(1)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(self.send_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 0, 12, 8)
        layout.addWidget(self.attachments)
        layout.addWidget(self.editor)
        layout.addLayout(buttons)

    def set_streaming(self, streaming: bool) -> None:
        self._streaming = streaming
        self.stop_button.setVisible(streaming)
        self.send_button.setVisible(not streaming)
        self.compare_button.setEnabled(not streaming)

    def set_attach_refused(self, reason: str | None) -> None:
        """Attaching is off while the model reads no pictures (``reason`` says why)."""
        self.attach_button.setEnabled(reason is None)
        self.attach_button.setToolTip(ATTACH_TIP if reason is None else reason)

    def clear(self) -> None:
        """The message was sent: empty the box and take the pictures away."""
        self.editor.clear()
        self.attachments.clear()

    def _send(self) -> None:
        """Ask to send; the window clears the text once it accepted the message."""
        text = self.editor.toPlainText().strip()
        if not self._streaming and (text or self.attachments.tiles):
            self.send_requested.emit(text)
