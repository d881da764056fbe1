"""A fenced code block of a reply: its language, a Copy button and the code, highlighted.

Highlighting is Pygments' (its HtmlFormatter escapes the code, so a reply can never inject
HTML through a code block); the colours come from a light or a dark Pygments style chosen by
the lightness of the window's palette, and the block re-renders when the palette changes (the
app's theme toggle). The block's background is the palette's, so both schemes read well. A
language Pygments does not know is shown as plain text, never guessed: guessing is slow and
often wrong on a few lines. While a reply streams only the block being written changes, and a
block whose code did not change is not highlighted again.

A lexer's first use compiles its regular expressions (about 50 ms for Python), which would
freeze the window when the first code block of a reply appears: :func:`warm_up_highlighting`
does that once, for the usual languages and both styles, in a background thread.
"""

from __future__ import annotations

import threading
from functools import cache, lru_cache

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.util import ClassNotFound
from PySide6.QtCore import QEvent
from PySide6.QtGui import QFontDatabase, QGuiApplication, QPalette
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.ui.chat.transcript.fitted_text import FittedTextView

LIGHT_STYLE = "default"
DARK_STYLE = "github-dark"
WARM_LANGUAGES = ("python", "bash", "javascript", "typescript", "json", "c", "cpp", "rust", "go")
DARK_WINDOW_LIGHTNESS = 128
"""A window colour darker than this (HSL lightness, 0–255) gets the dark Pygments style."""


def pygments_style_for(palette: QPalette) -> str:
    dark = palette.color(QPalette.ColorRole.Window).lightness() < DARK_WINDOW_LIGHTNESS
    return DARK_STYLE if dark else LIGHT_STYLE


def highlighted_html(code: str, language: str, style: str) -> str:
    """``code`` as HTML with inline colours (escaped by Pygments), no background, long lines
    wrapping (``pre-wrap``) since the view grows in height only."""
    html = highlight(code, _lexer(language), _formatter(style))
    html = html.replace('<pre style="', '<pre style="white-space: pre-wrap; ', 1)
    return html.replace("\n</pre>", "</pre>").strip()


@cache
def warm_up_highlighting() -> None:
    """Compile the usual lexers and both styles' formatters in the background (once)."""

    def warm() -> None:
        for style in (LIGHT_STYLE, DARK_STYLE):
            for language in WARM_LANGUAGES:
                highlighted_html("x = 1", language, style)

    threading.Thread(target=warm, name="warm-pygments", daemon=True).start()


@lru_cache(maxsize=64)
def _lexer(language: str) -> Lexer:
    try:
        return get_lexer_by_name(language, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return TextLexer(stripnl=False, ensurenl=False)


@lru_cache(maxsize=4)
def _formatter(style: str) -> HtmlFormatter:
    return HtmlFormatter(style=style, noclasses=True, nobackground=True)


class CodeView(FittedTextView):
    """The highlighted code: read-only, selectable, as tall as its text, long lines wrapped."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, margin=6)
        self.setObjectName("codeView")
        self.setOpenLinks(False)
        self.document().setDefaultFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))

    def show_html(self, html: str) -> None:
        self.setHtml(html)
        self.fit_height()


class CodeBlock(QFrame):
    """One code block: a header (language, Copy) over the highlighted code."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._code = ""
        self._language = ""
        self._style = ""
        self.setObjectName("codeBlock")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setBackgroundRole(QPalette.ColorRole.AlternateBase)
        self.setAutoFillBackground(True)
        self.language_label = QLabel()
        self.language_label.setObjectName("codeLanguage")
        self.copy_button = QToolButton()
        self.copy_button.setObjectName("copyCode")
        self.copy_button.setText("Copy")
        self.copy_button.setToolTip("Copy this code block (without its fences)")
        self.copy_button.setAutoRaise(True)
        self.copy_button.clicked.connect(self.copy_code)
        header = QHBoxLayout()
        header.setContentsMargins(8, 2, 2, 0)
        header.addWidget(self.language_label)
        header.addStretch(1)
        header.addWidget(self.copy_button)
        self.view = CodeView()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(1, 1, 1, 1)
        layout.setSpacing(0)
        layout.addLayout(header)
        layout.addWidget(self.view)

    @property
    def code(self) -> str:
        return self._code

    @property
    def language(self) -> str:
        return self._language

    @property
    def highlight_style(self) -> str:
        """The Pygments style the code is drawn in (light or dark, from the palette)."""
        return self._style

    def set_code(self, code: str, language: str) -> None:
        style = pygments_style_for(self.palette())
        if (code, language, style) == (self._code, self._language, self._style):
            return
        self._code, self._language, self._style = code, language, style
        self.language_label.setText(language or "code")
        self.view.show_html(highlighted_html(code, language, style))

    def copy_code(self) -> None:
        QGuiApplication.clipboard().setText(self._code)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self._style:
            self.set_code(self._code, self._language)
