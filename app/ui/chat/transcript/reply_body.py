"""A message's text as a column of Markdown views and highlighted code blocks.

The text is cut into prose and fenced code (:mod:`~app.ui.chat.transcript.reply_segments`); prose is
rendered by a :class:`MarkdownView` (Markdown, raw HTML shown as text), each code block by a
:class:`CodeBlock`. Re-rendering a streaming reply reuses the widgets already shown and only touches
the segments whose text changed — in practice the last one — so a long reply with many code blocks
costs about as much per render as its last paragraph.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QVBoxLayout, QWidget

from app.ui.chat.transcript.code_block import CodeBlock
from app.ui.chat.transcript.markdown_view import MarkdownView
from app.ui.chat.transcript.reply_segments import Segment, split_reply


class ReplyBody(QWidget):
    """Rendered message text; :attr:`rendered` fires after each render."""

    rendered = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(6)
        self._parts: list[MarkdownView | CodeBlock] = []
        self._segments: tuple[Segment, ...] = ()
        self._markdown = ""

    @property
    def markdown(self) -> str:
        return self._markdown

    @property
    def code_blocks(self) -> list[CodeBlock]:
        return [part for part in self._parts if isinstance(part, CodeBlock)]

    @property
    def text_views(self) -> list[MarkdownView]:
        return [part for part in self._parts if isinstance(part, MarkdownView)]

    def set_markdown(self, text: str) -> None:
        self._markdown = text
        self._show(split_reply(text), plain=False)

    def set_plain(self, text: str) -> None:
        """Show ``text`` as it is, in one view (a placeholder, a user's own words)."""
        self._markdown = text
        self._show((Segment(text),), plain=True)

    def plain_text(self) -> str:
        """What the user reads: every part's text, top to bottom."""
        return "\n".join(
            part.code if isinstance(part, CodeBlock) else part.toPlainText() for part in self._parts
        )

    def _show(self, segments: tuple[Segment, ...], *, plain: bool) -> None:
        for index, segment in enumerate(segments):
            part = self._part_for(index, segment)
            if isinstance(part, CodeBlock):
                part.set_code(segment.text, segment.language or "")
            elif plain:
                part.set_plain(segment.text)
            elif index >= len(self._segments) or self._segments[index] != segment:
                part.set_markdown(segment.text)
        for part in self._parts[len(segments) :]:
            self._layout.removeWidget(part)
            part.hide()
            part.deleteLater()
        del self._parts[len(segments) :]
        self._segments = () if plain else segments
        self.rendered.emit()

    def _part_for(self, index: int, segment: Segment) -> MarkdownView | CodeBlock:
        """The widget at ``index``, replaced when it is of the wrong kind."""
        wanted = CodeBlock if segment.is_code else MarkdownView
        if index < len(self._parts) and isinstance(self._parts[index], wanted):
            return self._parts[index]
        part = wanted()
        if index < len(self._parts):
            old = self._parts[index]
            self._layout.replaceWidget(old, part)
            old.hide()
            old.deleteLater()
            self._parts[index] = part
        else:
            self._layout.addWidget(part)
            self._parts.append(part)
        if index < len(self._segments):
            self._segments = self._segments[:index]  # the new widget has shown nothing yet
        return part
