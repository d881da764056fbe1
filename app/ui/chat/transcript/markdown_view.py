"""A message body: Markdown rendered by Qt itself, code blocks boxed, as tall as its text.

Replies are Markdown, so they are rendered with ``QTextDocument.setMarkdown`` (GitHub dialect:
tables, fenced code, task lists) — no extra dependency. Raw HTML in a reply is shown as text,
never interpreted: a model's output must not be able to restyle the window or embed content.
Fenced code blocks get a monospace font and a tinted background so they stand out, and their
long lines wrap (the view has no horizontal scroll bar: it grows to fit its text and the
transcript scrolls instead).
"""

from __future__ import annotations

from PySide6.QtGui import (
    QColor,
    QFontDatabase,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
    QTextOption,
)
from PySide6.QtWidgets import QWidget

from app.ui.chat.transcript.fitted_text import FittedTextView

MARKDOWN_FEATURES = QTextDocument.MarkdownFeature(
    QTextDocument.MarkdownFeature.MarkdownDialectGitHub.value
    | QTextDocument.MarkdownFeature.MarkdownNoHTML.value
)
CODE_BACKGROUND = QColor(127, 127, 127, 38)


class MarkdownView(FittedTextView):
    """Read-only rendered Markdown whose height follows its content."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, margin=2)
        self.setOpenExternalLinks(True)
        self.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self._markdown = ""

    @property
    def markdown(self) -> str:
        return self._markdown

    def set_markdown(self, text: str) -> None:
        self._markdown = text
        self.document().setMarkdown(text, MARKDOWN_FEATURES)
        _box_code_blocks(self.document())
        self.fit_height()

    def set_plain(self, text: str) -> None:
        self._markdown = text
        self.setPlainText(text)
        self.fit_height()


def _box_code_blocks(document: QTextDocument) -> None:
    monospace = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    block = document.begin()
    cursor = QTextCursor(document)
    cursor.beginEditBlock()
    while block.isValid():
        if block.blockFormat().hasProperty(QTextFormat.Property.BlockCodeFence):
            cursor.setPosition(block.position())
            cursor.setPosition(
                block.position() + max(block.length() - 1, 0), QTextCursor.MoveMode.KeepAnchor
            )
            block_format = QTextBlockFormat()
            block_format.setBackground(CODE_BACKGROUND)
            block_format.setLeftMargin(6)
            block_format.setRightMargin(6)
            block_format.setNonBreakableLines(False)  # wrap long lines instead of cutting them
            cursor.mergeBlockFormat(block_format)
            char_format = QTextCharFormat()
            char_format.setFont(monospace)
            cursor.mergeCharFormat(char_format)
        block = block.next()
    cursor.endEditBlock()
