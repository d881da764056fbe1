"""The scrolling column of messages, with an empty state and follow-the-bottom scrolling.

While a reply streams the view stays pinned to the bottom — unless the user scrolled up to read
something, in which case it stays where they are.

The transcript also knows which local model answers (:meth:`set_speed_model`), keeps that
model's plain replies as its measured plain speed (:meth:`record_plain_reply`) and hands the
speed to the replies that model wrote, which show their "MTP ×N faster" badge from it.

Its messages' actions come out as the transcript's own signals (``edit_submitted``,
``attach_to_edit_requested``, ``regenerate_requested``, ``version_chosen``,
``depth_requested``), so whoever answers them connects once, not to every message. The
thumbnails of the pictures in its messages are made and kept by its :attr:`thumbnails`.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QScrollArea, QVBoxLayout, QWidget

from app.engine.chat.conversation import ASSISTANT, StoredMessage
from app.engine.chat.plain_speed import PlainSpeed, PlainSpeedStore, speed_key
from app.engine.runtime.core.stats import DecodeStats
from app.ui.chat.transcript.code_block import warm_up_highlighting
from app.ui.chat.transcript.message_widget import MessageWidget
from app.ui.thumbnails import Thumbnails

EMPTY_TEXT = (
    "<p style='font-size:15px'><b>Start a conversation</b></p>"
    "<p>Type a message below. Replies stream here, with their speed, time to first token and "
    "— with MTP on — the draft acceptance at each depth underneath.</p>"
    "<p>Use <b>Compare</b> to run the same prompt with plain decoding and with MTP side by "
    "side.</p>"
)


class TranscriptView(QScrollArea):
    edit_submitted = Signal(int, str, object)
    """A user message was edited: its id, new text and pictures (a tuple of ImagePart)."""
    attach_to_edit_requested = Signal(int)
    """Pictures should be added to the new version of a user message (its id) being edited."""
    regenerate_requested = Signal(int)
    """The last reply (its id) should be answered again."""
    version_chosen = Signal(int)
    """Another version of a message (its id) should be shown, with what followed it."""
    depth_requested = Signal(int, int)
    """A reply (its id) should be answered again drafting this many tokens per cycle."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._column = QWidget()
        self._layout = QVBoxLayout(self._column)
        self._layout.setContentsMargins(12, 12, 12, 12)
        self._layout.setSpacing(10)
        self.empty_label = QLabel(EMPTY_TEXT)
        self.empty_label.setWordWrap(True)
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label.setStyleSheet("color: palette(placeholder-text); padding: 40px;")
        self._layout.addWidget(self.empty_label)
        self._layout.addStretch(1)
        self.setWidget(self._column)
        self.thumbnails = Thumbnails(self)
        self.messages: list[MessageWidget] = []
        self.plain_speeds = PlainSpeedStore.in_app_data()
        self._speed_model = ""
        self._speed_key: str | None = None
        self._plain_speed: PlainSpeed | None = None
        self._follow = True
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.rangeChanged.connect(self._on_range_changed)

    def clear(self) -> None:
        self._drop(self.messages)
        self.messages = []
        self.empty_label.show()
        self._follow = True

    def show_messages(self, messages: tuple[StoredMessage, ...]) -> list[MessageWidget]:
        self.clear()
        widgets = [self.add(message.role, message.model) for message in messages]
        for widget, message in zip(widgets, messages, strict=True):
            widget.show_message(message)
        self._show_plain_speed(widgets)
        self.update_regenerate()
        return widgets

    def add(self, role: str, model: str = "") -> MessageWidget:
        widget = MessageWidget(role, self.thumbnails, model)
        widget.edit_submitted.connect(self.edit_submitted)
        widget.attach_to_edit_requested.connect(self.attach_to_edit_requested)
        widget.regenerate_requested.connect(self.regenerate_requested)
        widget.version_chosen.connect(self.version_chosen)
        widget.depth_requested.connect(self.depth_requested)
        self._layout.insertWidget(self._layout.count() - 1, widget)
        self.messages.append(widget)
        self._show_plain_speed([widget])
        self.empty_label.hide()
        self._follow = True
        return widget

    def message(self, message_id: int) -> MessageWidget | None:
        """The widget showing message ``message_id``, if it is shown."""
        return next((widget for widget in self.messages if widget.message_id == message_id), None)

    def remove_from(self, index: int) -> None:
        """Drop the message widgets from ``index`` on (an edited message's old answers)."""
        self._drop(self.messages[index:])
        self.messages = self.messages[:index]
        self.empty_label.setVisible(not self.messages)

    def _drop(self, widgets: list[MessageWidget]) -> None:
        for widget in widgets:
            self._layout.removeWidget(widget)
            widget.hide()
            widget.deleteLater()

    def update_versions(self, messages: tuple[StoredMessage, ...]) -> None:
        """Each shown message's versions, as stored now (after a reply added one)."""
        for widget, message in zip(self.messages, messages, strict=False):
            if widget.message_id == message.id:
                widget.show_versions(message.versions)

    def update_regenerate(self) -> None:
        """Only the last reply can be regenerated."""
        for widget in self.messages:
            widget.set_regenerate_available(False)
        if self.messages and self.messages[-1].role == ASSISTANT:
            self.messages[-1].set_regenerate_available(True)

    def set_actions_enabled(self, enabled: bool) -> None:
        for widget in self.messages:
            widget.set_actions_enabled(enabled)

    # -- measured plain speed -----------------------------------------------------------------

    def set_speed_model(self, model_name: str, model_path: Path | None, backend: str) -> None:
        """The local model now answering (``model_path`` None: none, or a remote one)."""
        self._speed_model = model_name
        self._speed_key = None if model_path is None else speed_key(model_path, backend)
        self._plain_speed = self._read_plain_speed()
        self._show_plain_speed(self.messages)

    def prepare_code_highlighting(self) -> None:
        """Compile the usual lexers in the background; called while a model loads, when the
        window is otherwise idle, so a reply's first code block does not freeze it."""
        warm_up_highlighting()

    def record_plain_reply(self, stats: DecodeStats) -> None:
        """Count a finished reply of the current model towards its plain speed when it was
        decoded plainly (MTP off, or Compare's plain run)."""
        if self._speed_key is not None and self.plain_speeds.record(self._speed_key, stats):
            self._plain_speed = self._read_plain_speed()
            self._show_plain_speed(self.messages)

    def _read_plain_speed(self) -> PlainSpeed | None:
        key = self._speed_key
        return self.plain_speeds.plain_speed(key) if key is not None else None

    def _show_plain_speed(self, widgets: list[MessageWidget]) -> None:
        for widget in widgets:
            if widget.role == ASSISTANT:
                measurable = self._speed_key is not None and widget.model == self._speed_model
                plain = self._plain_speed if measurable else None
                widget.set_plain_speed(plain, measurable=measurable)

    def _on_scrolled(self, value: int) -> None:
        self._follow = value >= self.verticalScrollBar().maximum() - 4

    def _on_range_changed(self, _minimum: int, maximum: int) -> None:
        if self._follow:
            self.verticalScrollBar().setValue(maximum)
