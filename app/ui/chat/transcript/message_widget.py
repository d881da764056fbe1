"""One message in the transcript: who wrote it, its rendered text, its figures and its actions.

A user's message is a tinted bubble on the right, its pictures as thumbnails above its text
(a click shows one larger; :mod:`app.ui.picture_tiles`); a reply runs the full width under the
name of the model that wrote it, its code blocks highlighted, each with a Copy button (see
:mod:`~app.ui.chat.transcript.reply_body`). Edit changes the text and keeps the pictures, or
takes some away (their ×) and adds others (**Add pictures…**, ``attach_to_edit_requested``).

A reply that is streaming shows its first text at once (what the user reads as time to first token),
then re-renders at most every ``RENDER_INTERVAL_MS`` (longer when rendering itself gets slow on a
long reply), so a fast model cannot flood the GUI thread with Markdown layouts: later chunks only
append to a string, the timer renders the latest text. Under every reply is one compact line of
figures, a "MTP ×1.8 faster" badge when drafting beat the model's measured plain speed
(:mod:`app.engine.chat.plain_speed`), and a Details toggle that shows every figure (tokens, tok/s,
TTFT, stop reason, the MTP line, the prompt and how much of it was reused from earlier turns, see
:mod:`~app.ui.chat.transcript.prompt_figures`, the speedup); a failed reply keeps its partial text
and shows the error under it.
"""

from __future__ import annotations

import html
import time
from dataclasses import replace

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import (
    QColor,
    QFontMetrics,
    QGuiApplication,
    QPainter,
    QPaintEvent,
    QPalette,
    QResizeEvent,
)
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

from app.engine.chat.conversation import ASSISTANT, USER, MessageState, StoredMessage
from app.engine.chat.figures import (
    auto_depth_line,
    badge_text,
    compact_line,
    drafted_nothing,
    reply_figures,
    speedup_line,
    suggested_depth,
)
from app.engine.chat.history import FAILED_REASON
from app.engine.chat.plain_speed import PlainSpeed, speedup
from app.engine.runtime.chat_format.images import ImagePart
from app.engine.runtime.core.request import GenerationResult
from app.engine.runtime.core.stats import DecodeStats
from app.ui.chat.transcript.prompt_figures import prompt_line
from app.ui.chat.transcript.reply_body import ReplyBody
from app.ui.picture_tiles import PictureTiles
from app.ui.thumbnails import Thumbnails
from app.ui.wording import in_window_words

RENDER_INTERVAL_MS = 60
BUBBLE_WIDTH_SHARE = 0.75
BUBBLE_PADDING = 12
BUBBLE_SLACK = 32
"""Room for the Markdown view's margins, so a one-line message does not wrap."""
BUBBLE_MIN_WIDTH = 60
BUBBLE_STRETCH = 100
BUBBLE_RADIUS = 12
BUBBLE_TINT_ALPHA = 46
RENDER_BUDGET_SHARE = 0.25
"""A re-render may use at most this share of the GUI thread while a reply streams."""
INTERRUPTED_TEXT = "Interrupted: the app stopped while this reply was being written."
PICTURE_SIDE = 160
"""The longest side of a sent picture's thumbnail in the transcript, in pixels."""


class MessageWidget(QFrame):
    """Shows one message; a streaming reply is fed with :meth:`append` and closed with
    :meth:`finish` or :meth:`fail`.

    Signals: ``edit_submitted(id, text, pictures)``, ``attach_to_edit_requested(id)``,
    ``regenerate_requested(id)``, ``version_chosen(id)`` (‹ › between a message's versions) and
    ``depth_requested(id, depth)`` ("Try MTP depth 3" on a reply auto ran without drafts)."""

    edit_submitted = Signal(int, str, object)
    attach_to_edit_requested = Signal(int)
    regenerate_requested = Signal(int)
    version_chosen = Signal(int)
    depth_requested = Signal(int, int)

    def __init__(
        self, role: str, thumbnails: Thumbnails, model: str = "", parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.role = role
        self.model = model
        self.message_id = 0
        self.versions: tuple[int, ...] = ()
        self._thumbnails = thumbnails
        self.pictures = PictureTiles(thumbnails, PICTURE_SIDE)
        self.pictures.setObjectName("messagePictures")
        self.setObjectName("userMessage" if role == USER else "assistantMessage")
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.header = QLabel(f"<b>{html.escape(model) if model else 'Assistant'}</b>")
        self.header.setObjectName("messageHeader")
        self.header.setTextFormat(Qt.TextFormat.RichText)
        self.header.setVisible(role == ASSISTANT)
        self.body = ReplyBody()
        self.bubble = Bubble(self.body, self.pictures) if role == USER else None
        self._build_figures()
        self._build_actions()
        self.edit_area: QWidget | None = None  # built on the first Edit
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(4, 4, 4, 4)
        self._layout.setSpacing(4)
        self._layout.addWidget(self.header)
        if self.bubble is not None:
            row = QHBoxLayout()
            row.setContentsMargins(0, 0, 0, 0)
            row.addStretch(1)
            row.addWidget(self.bubble, BUBBLE_STRETCH)  # up to its maximum width, then the spacer
            self._layout.addLayout(row)
        else:
            self._layout.addWidget(self.body)
        notice_row = QHBoxLayout()  # a notice and, for a reply auto ran plainly, what to try
        notice_row.setContentsMargins(0, 0, 0, 0)
        notice_row.addWidget(self.notice, 1)
        notice_row.addWidget(self.try_depth_button, 0, Qt.AlignmentFlag.AlignTop)
        self._edit_at = self._layout.count()  # where an editor goes, under the message
        self._layout.addLayout(notice_row)
        self._layout.addLayout(self._actions)
        self._layout.addWidget(self.details)

        self._text = ""
        self._streaming = False
        self._stats: DecodeStats | None = None
        self._plain_speed: PlainSpeed | None = None
        self._speed_measurable = False
        self._render_cost = 0.0
        self._render_timer = QTimer(self)
        self._render_timer.setSingleShot(True)
        self._render_timer.timeout.connect(self._render)

    def _build_figures(self) -> None:
        self.summary = QLabel()
        self.summary.setObjectName("replySummary")
        self.summary.setWordWrap(True)
        self.badge = QLabel()
        self.badge.setObjectName("mtpBadge")
        self.badge.hide()
        self.details_button = _tool_button("Details", "Show every figure of this reply")
        self.details_button.setCheckable(True)
        self.figures = _figures_label("replyFigures")
        self.prompt = _figures_label("replyPrompt")
        self.prompt.hide()
        self.speed = _figures_label("replySpeed")
        self.speed.hide()
        self.details = QWidget()
        self.details.setObjectName("replyDetails")
        details_layout = QVBoxLayout(self.details)
        details_layout.setContentsMargins(0, 0, 0, 0)
        details_layout.setSpacing(2)
        for label in (self.figures, self.prompt, self.speed):
            details_layout.addWidget(label)
        self.details.hide()
        self.details_button.toggled.connect(self.details.setVisible)
        self.details_button.hide()
        self.notice = QLabel()
        self.notice.setObjectName("replyNotice")
        self.notice.setWordWrap(True)
        self.notice.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.notice.hide()

    def _build_actions(self) -> None:
        self.copy_button = _tool_button("Copy", "Copy the message's text (Markdown)")
        self.copy_button.clicked.connect(self.copy_text)
        self.edit_button = _tool_button(
            "Edit", "Change this message and send it again (the original is kept as a version)"
        )
        self.edit_button.clicked.connect(self.begin_edit)
        self.edit_button.setVisible(self.role == USER)
        self.regenerate_button = _tool_button(
            "Regenerate", "Answer the last message again (this reply is kept as a version)"
        )
        self.regenerate_button.clicked.connect(
            lambda: self.regenerate_requested.emit(self.message_id)
        )
        self.regenerate_button.hide()
        self.try_depth_button = _tool_button("Try MTP depth 3", "")
        self.try_depth_button.setObjectName("tryDepthButton")
        self.try_depth_button.hide()
        self._suggested_depth = 0
        self.try_depth_button.clicked.connect(
            lambda: self.depth_requested.emit(self.message_id, self._suggested_depth)
        )
        self.previous_version = _tool_button("‹", "The previous version of this message")
        self.next_version = _tool_button("›", "The next version of this message")
        self.version_label = QLabel()
        self.version_label.setObjectName("versionLabel")
        self.previous_version.clicked.connect(lambda: self._step_version(-1))
        self.next_version.clicked.connect(lambda: self._step_version(1))
        self._actions = QHBoxLayout()
        self._actions.setContentsMargins(0, 0, 0, 0)
        self._actions.setSpacing(4)
        if self.role == USER:
            self._actions.addStretch(1)
        else:  # the badge first, the figures taking the room left (wrapping when short of it)
            self._actions.addWidget(self.badge)
            self._actions.addWidget(self.summary, 1)
            self._actions.addWidget(self.details_button)
        for widget in (self.previous_version, self.version_label, self.next_version):
            widget.hide()
            self._actions.addWidget(widget)
        for button in (
            self.copy_button,
            self.edit_button,
            self.regenerate_button,
        ):
            self._actions.addWidget(button)

    # -- content ------------------------------------------------------------------------------

    @property
    def text(self) -> str:
        return self._text

    @property
    def streaming(self) -> bool:
        return self._streaming

    def show_message(self, message: StoredMessage) -> None:
        """Show a stored message (a finished, failed or interrupted one) and its versions."""
        self.message_id = message.id
        self._text = message.content
        self.pictures.set_pictures([placed.image for placed in message.images])
        self.body.setVisible(bool(message.content) or message.role == ASSISTANT)
        self._render()
        self.show_versions(message.versions)
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
        if self.bubble is not None:
            self.bubble.fit(self._text, self.width())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self.bubble is not None and event.size().width() != event.oldSize().width():
            self.bubble.fit(self._text, event.size().width())

    def show_versions(self, versions: tuple[int, ...]) -> None:
        """‹ 2/3 › when the message has other versions (a regenerated reply, an edit)."""
        self.versions = versions
        several = len(versions) > 1 and self.message_id in versions
        for widget in (self.previous_version, self.version_label, self.next_version):
            widget.setVisible(several)
        if several:
            index = versions.index(self.message_id)
            self.version_label.setText(f"{index + 1}/{len(versions)}")
            self.previous_version.setEnabled(index > 0)
            self.next_version.setEnabled(index < len(versions) - 1)

    def _step_version(self, step: int) -> None:
        index = self.versions.index(self.message_id) + step
        if 0 <= index < len(self.versions):
            self.version_chosen.emit(self.versions[index])

    def _show_figures(self, stats: DecodeStats, finish_reason: str | None) -> None:
        self._stats = stats
        figures = reply_figures(stats, finish_reason)
        if finish_reason is not None and drafted_nothing(stats):  # the notice says why
            figures = replace(figures, auto=None)
        full = "\n".join(figures.lines())
        self.summary.setText(compact_line(stats, finish_reason))
        self.summary.setToolTip(full)
        self.figures.setText(full)
        prompt = prompt_line(stats)
        self.prompt.setText(prompt or "")
        self.prompt.setVisible(prompt is not None)
        self.details_button.show()
        self._show_speedup()
        self._offer_depth(stats, finish_reason)

    def _offer_depth(self, stats: DecodeStats, finish_reason: str | None) -> None:
        """A finished reply auto ran without drafts: say why in one line, offer a fixed depth."""
        offer = finish_reason is not None and drafted_nothing(stats)
        self.try_depth_button.setVisible(offer)
        if not offer:
            return
        self._suggested_depth = suggested_depth(stats)
        self.try_depth_button.setText(f"Try MTP depth {self._suggested_depth}")
        self.try_depth_button.setToolTip(
            f"Answer again drafting {self._suggested_depth} tokens per cycle (kept as a new "
            "version), to see what the MTP head does here"
        )
        why = auto_depth_line(stats)
        if why is not None and not self.notice.text():  # a failure's notice stays
            self._show_notice(why, error=False)

    def set_plain_speed(self, plain: PlainSpeed | None, *, measurable: bool) -> None:
        """The model's measured plain speed (``measurable``: this reply's model and machine are
        the ones it is measured for; a remote model's is not)."""
        self._plain_speed, self._speed_measurable = plain, measurable
        self._show_speedup()

    def _show_speedup(self) -> None:
        stats = self._stats
        if self._streaming or stats is None or not self._speed_measurable:
            self.badge.hide()
            self.speed.hide()
            return
        measured = speedup(stats, self._plain_speed)
        line = speedup_line(stats, measured)
        self.speed.setText(line or "")
        self.speed.setVisible(line is not None)
        if measured is not None and measured.earns_badge:
            self.badge.setText(badge_text(measured))
            self.badge.setToolTip(line)
            self.badge.show()
        else:
            self.badge.hide()

    def _show_notice(self, text: str, *, error: bool) -> None:
        text = in_window_words(text)
        self.notice.setProperty("tone", "error" if error else "muted")
        self.notice.style().unpolish(self.notice)
        self.notice.style().polish(self.notice)
        self.notice.setText(text)
        self.notice.show()

    # -- actions ------------------------------------------------------------------------------

    def set_regenerate_available(self, available: bool) -> None:
        self.regenerate_button.setVisible(available and self.role == ASSISTANT)

    def set_actions_enabled(self, enabled: bool) -> None:
        """Edit, regenerate, versions and trying a depth are refused while a reply streams."""
        for button in (self.edit_button, self.regenerate_button, self.try_depth_button):
            button.setEnabled(enabled)
        if enabled:
            self.show_versions(self.versions)
        else:
            self.previous_version.setEnabled(False)
            self.next_version.setEnabled(False)

    def copy_text(self) -> None:
        QGuiApplication.clipboard().setText(self._text)

    def begin_edit(self) -> None:
        if self.edit_area is None:
            self._build_editor()
        assert self.edit_area is not None
        self.editor.setPlainText(self._text)
        self.edit_pictures.set_pictures(self.pictures.pictures())
        (self.bubble or self.body).hide()
        self.edit_area.show()
        self.editor.setFocus()

    def _build_editor(self) -> None:
        """The editor under a user's message, built on its first Edit (most never are)."""
        self.editor = QPlainTextEdit()
        self.editor.setObjectName("messageEditor")
        self.editor.setMaximumHeight(140)
        self.editor.setTabChangesFocus(True)
        self.save_edit_button = QPushButton("Send as a new version")
        self.save_edit_button.setToolTip(
            "Send the changed message; the original and what followed it stay as version 1"
        )
        self.save_edit_button.clicked.connect(self._submit_edit)
        self.cancel_edit_button = QPushButton("Cancel")
        self.cancel_edit_button.clicked.connect(self._end_edit)
        self.edit_pictures = PictureTiles(self._thumbnails, PICTURE_SIDE // 2, removable=True)
        self.add_pictures_button = QPushButton("Add pictures…")
        self.add_pictures_button.setToolTip(
            "Add pictures to the new version (take the old ones away with their ×)"
        )
        self.add_pictures_button.clicked.connect(
            lambda: self.attach_to_edit_requested.emit(self.message_id)
        )
        edit_buttons = QHBoxLayout()
        edit_buttons.addWidget(self.add_pictures_button)
        edit_buttons.addStretch(1)
        edit_buttons.addWidget(self.cancel_edit_button)
        edit_buttons.addWidget(self.save_edit_button)
        self.edit_area = QWidget()
        edit_layout = QVBoxLayout(self.edit_area)
        edit_layout.setContentsMargins(0, 0, 0, 0)
        edit_layout.addWidget(self.edit_pictures)
        edit_layout.addWidget(self.editor)
        edit_layout.addLayout(edit_buttons)
        self._layout.insertWidget(self._edit_at, self.edit_area)

    def add_edit_picture(self, picture: ImagePart) -> None:
        """A picture read for the version being edited."""
        if self.edit_area is not None and self.edit_area.isVisible():
            self.edit_pictures.add(picture)

    def _submit_edit(self) -> None:
        text = self.editor.toPlainText().strip()
        pictures = self.edit_pictures.pictures()
        if not text and not pictures:
            return
        self._end_edit()
        self.edit_submitted.emit(self.message_id, text, pictures)

    def _end_edit(self) -> None:
        if self.edit_area is not None:
            self.edit_area.hide()
        (self.bubble or self.body).show()


class Bubble(QFrame):
    """A user's message: a rounded box tinted with the palette's highlight colour, as wide as
    its text (or its row of pictures) up to ``BUBBLE_WIDTH_SHARE`` of the transcript."""

    def __init__(
        self, body: ReplyBody, pictures: PictureTiles, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self._pictures = pictures
        self.setObjectName("userBubble")
        self.setMinimumWidth(BUBBLE_MIN_WIDTH)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(
            BUBBLE_PADDING, BUBBLE_PADDING // 2, BUBBLE_PADDING, BUBBLE_PADDING // 2
        )
        layout.addWidget(pictures)
        layout.addWidget(body)

    def fit(self, text: str, available: int) -> None:
        metrics = QFontMetrics(self.font())
        natural = max((metrics.horizontalAdvance(line) for line in text.splitlines()), default=0)
        if self._pictures.tiles:
            natural = max(natural, len(self._pictures.tiles) * (PICTURE_SIDE + 6 + 6))
        wanted = natural + 2 * BUBBLE_PADDING + BUBBLE_SLACK
        self.setMaximumWidth(
            max(min(wanted, int(available * BUBBLE_WIDTH_SHARE)), BUBBLE_MIN_WIDTH)
        )

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        tint = QColor(self.palette().color(QPalette.ColorRole.Highlight))
        tint.setAlpha(BUBBLE_TINT_ALPHA)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(tint)
        painter.drawRoundedRect(self.rect(), BUBBLE_RADIUS, BUBBLE_RADIUS)


def _figures_label(name: str) -> QLabel:
    label = QLabel()
    label.setObjectName(name)
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


def _tool_button(text: str, tip: str) -> QToolButton:
    button = QToolButton()
    button.setText(text)
    button.setToolTip(tip)
    button.setAutoRaise(True)
    return button
