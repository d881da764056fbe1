"""One message in the transcript: who wrote it, its rendered text, its figures and its actions.

A reply that is streaming shows its first text at once (what the user reads as time to first
token), then re-renders at most every ``RENDER_INTERVAL_MS`` (longer when rendering itself gets
slow on a long reply), so a fast model cannot flood the GUI thread with Markdown layouts: later
chunks only append to a string, the timer renders the latest text. Under every reply
are its figures (tokens, tok/s, TTFT, stop reason, and the MTP line); a failed reply keeps its
partial text and shows the error under it.
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.chat.conversation import ASSISTANT, USER, MessageState, StoredMessage
from app.engine.chat.figures import reply_figures
from app.engine.chat.history import FAILED_REASON
from app.engine.runtime.request import GenerationResult
from app.engine.runtime.stats import DecodeStats
from app.ui.chat.markdown_view import MarkdownView

RENDER_INTERVAL_MS = 60
RENDER_BUDGET_SHARE = 0.25
"""A re-render may use at most this share of the GUI thread while a reply streams."""
INTERRUPTED_TEXT = "Interrupted: the app stopped while this reply was being written."


class MessageWidget(QFrame):
    """Shows one message; a streaming reply is fed with :meth:`append` and closed with
    :meth:`finish` or :meth:`fail`."""

    edit_submitted = Signal(int, str)
    regenerate_requested = Signal(int)

    def __init__(self, role: str, model: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.role = role
        self.message_id = 0
        self.setObjectName("userMessage" if role == USER else "assistantMessage")
        self.setFrameShape(QFrame.Shape.StyledPanel if role == USER else QFrame.Shape.NoFrame)
        who = "You" if role == USER else "Assistant"
        self.header = QLabel(f"<b>{who}</b>" + (f" · {model}" if model else ""))
        self.header.setTextFormat(Qt.TextFormat.RichText)
        self.body = MarkdownView()
        self.figures = QLabel()
        self.figures.setObjectName("replyFigures")
        self.figures.setWordWrap(True)
        self.figures.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.figures.setStyleSheet("color: palette(placeholder-text);")
        self.figures.hide()
        self.notice = QLabel()
        self.notice.setObjectName("replyNotice")
        self.notice.setWordWrap(True)
        self.notice.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.notice.hide()

        self.copy_button = _tool_button("Copy", "Copy the message's text (Markdown)")
        self.copy_button.clicked.connect(self.copy_text)
        self.edit_button = _tool_button("Edit", "Change this message and send it again")
        self.edit_button.clicked.connect(self.begin_edit)
        self.edit_button.setVisible(role == USER)
        self.regenerate_button = _tool_button("Regenerate", "Answer the last message again")
        self.regenerate_button.clicked.connect(
            lambda: self.regenerate_requested.emit(self.message_id)
        )
        self.regenerate_button.hide()
        actions = QHBoxLayout()
        actions.setContentsMargins(0, 0, 0, 0)
        for button in (self.copy_button, self.edit_button, self.regenerate_button):
            actions.addWidget(button)
        actions.addStretch(1)

        self.editor = QPlainTextEdit()
        self.editor.setObjectName("messageEditor")
        self.editor.setMaximumHeight(140)
        self.save_edit_button = QPushButton("Save && send")
        self.save_edit_button.clicked.connect(self._submit_edit)
        self.cancel_edit_button = QPushButton("Cancel")
        self.cancel_edit_button.clicked.connect(self._end_edit)
        edit_buttons = QHBoxLayout()
        edit_buttons.addStretch(1)
        edit_buttons.addWidget(self.cancel_edit_button)
        edit_buttons.addWidget(self.save_edit_button)
        self.edit_area = QWidget()
        edit_layout = QVBoxLayout(self.edit_area)
        edit_layout.setContentsMargins(0, 0, 0, 0)
        edit_layout.addWidget(self.editor)
        edit_layout.addLayout(edit_buttons)
        self.edit_area.hide()

        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        layout.setSpacing(3)
        layout.addWidget(self.header)
        layout.addWidget(self.body)
        layout.addWidget(self.edit_area)
        layout.addWidget(self.figures)
        layout.addWidget(self.notice)
        layout.addLayout(actions)

        self._text = ""
        self._streaming = False
        self._stats: DecodeStats | None = None
        self._render_cost = 0.0
        self._render_timer = QTimer(self)
        self._render_timer.setSingleShot(True)
        self._render_timer.timeout.connect(self._render)

    # -- content ------------------------------------------------------------------------------

    @property
    def text(self) -> str:
        return self._text

    @property
    def streaming(self) -> bool:
        return self._streaming

    def show_message(self, message: StoredMessage) -> None:
        """Show a stored message (a finished, failed or interrupted one)."""
        self.message_id = message.id
        self._text = message.content
        self._render()
        if message.role != ASSISTANT:
            return
        if message.stats is not None:
            self._show_figures(message.stats, message.finish_reason or None)
        if message.state is MessageState.FAILED:
            self._show_notice(message.error, error=True)
        elif message.state is MessageState.INTERRUPTED:
            self._show_notice(INTERRUPTED_TEXT, error=False)
        elif message.note:
            self._show_notice(message.note, error=False)

    def begin_stream(self, message_id: int) -> None:
        self.message_id = message_id
        self._streaming = True
        self._text = ""
        self.body.set_plain("…")
        self.copy_button.setEnabled(False)

    def append(self, text: str, stats: DecodeStats) -> None:
        first_text = not self._text and bool(text)
        self._text += text
        self._stats = stats
        self._show_figures(stats, None)
        if first_text:
            self._render()
        elif not self._render_timer.isActive():
            interval = max(RENDER_INTERVAL_MS, int(self._render_cost / RENDER_BUDGET_SHARE * 1000))
            self._render_timer.start(interval)

    def finish(self, result: GenerationResult) -> None:
        self._end_stream(result.text)
        self._show_figures(result.stats, result.finish_reason)
        if result.note:
            self._show_notice(result.note, error=False)

    def fail(self, message: str) -> None:
        self._end_stream(self._text)
        if self._stats is not None:
            self._show_figures(self._stats, FAILED_REASON)
        self._show_notice(message, error=True)

    def _end_stream(self, text: str) -> None:
        self._streaming = False
        self._render_timer.stop()
        self._text = text
        self._render()
        self.copy_button.setEnabled(True)

    def _render(self) -> None:
        started = time.perf_counter()
        self.body.set_markdown(self._text)
        self._render_cost = time.perf_counter() - started

    def _show_figures(self, stats: DecodeStats, finish_reason: str | None) -> None:
        self.figures.setText("\n".join(reply_figures(stats, finish_reason).lines()))
        self.figures.show()

    def _show_notice(self, text: str, *, error: bool) -> None:
        color = "#b00020" if error else "palette(placeholder-text)"
        self.notice.setStyleSheet(f"color: {color};")
        self.notice.setText(text)
        self.notice.show()

    # -- actions ------------------------------------------------------------------------------

    def set_regenerate_available(self, available: bool) -> None:
        self.regenerate_button.setVisible(available and self.role == ASSISTANT)

    def set_actions_enabled(self, enabled: bool) -> None:
        """Edit and regenerate are refused while a reply streams."""
        self.edit_button.setEnabled(enabled)
        self.regenerate_button.setEnabled(enabled)

    def copy_text(self) -> None:
        QGuiApplication.clipboard().setText(self._text)

    def begin_edit(self) -> None:
        self.editor.setPlainText(self._text)
        self.body.hide()
        self.edit_area.show()
        self.editor.setFocus()

    def _submit_edit(self) -> None:
        text = self.editor.toPlainText().strip()
        if not text:
            return
        self._end_edit()
        self.edit_submitted.emit(self.message_id, text)

    def _end_edit(self) -> None:
        self.edit_area.hide()
        self.body.show()


def _tool_button(text: str, tip: str) -> QToolButton:
    button = QToolButton()
    button.setText(text)
    button.setToolTip(tip)
    button.setAutoRaise(True)
    return button
