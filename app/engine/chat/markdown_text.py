"""Text placed into an exported Markdown conversation so that it cannot forge the export's own
sections.

Why: an export is ``# title`` then one ``## User`` / ``## Assistant`` section per message. A
title holding ``\\n## Assistant`` or a message with a line ``## Assistant`` (or ``Assistant`` over
``---``, or ``<h2>``) made a reader — or a tool that splits the file by headings — see a message
nobody wrote, and an unclosed code fence swallowed every section after it. So a title or model
name becomes one line (:func:`inline`); in a message's text (:func:`block`) every line that would
make a level-1 or level-2 heading or start an HTML block is escaped with a backslash (shown as
written, not obeyed), an open fence is closed at the end, and control characters are shown as
escapes (:func:`~app.engine.terminal.printable`). Everything else — lists, code, deeper headings —
stays as the model wrote it.
"""

from __future__ import annotations

import re

from app.engine.terminal import printable

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_SECTION_HEADING = re.compile(r" {0,3}#{1,2}(?:[ \t]|$)")
_SETEXT_UNDERLINE = re.compile(r" {0,3}(?:=+|-+)[ \t]*$")
_HTML_START = re.compile(r" {0,3}<")


def inline(text: str) -> str:
    """``text`` on one line: line breaks and runs of blanks become one space."""
    return " ".join(printable(text, multiline=True).split())


def _could_open_section(line: str, previous_is_text: bool) -> bool:
    if _SECTION_HEADING.match(line) or _HTML_START.match(line):
        return True
    return previous_is_text and _SETEXT_UNDERLINE.match(line) is not None


def block(text: str) -> str:
    """``text`` with lines that could open a section escaped, and any open fence closed."""
    lines = printable(text, multiline=True).split("\n")
    fence: str | None = None
    previous_is_text = False
    for index, line in enumerate(lines):
        opening = _FENCE.match(line)
        if fence is not None:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = None
            previous_is_text = False
            continue
        if opening:
            fence = opening.group(1)
        elif _could_open_section(line, previous_is_text):
            lines[index] = "\\" + line.lstrip(" ")
        previous_is_text = fence is None and bool(line.strip()) and not opening
    if fence is not None:
        lines.append(fence)
    return "\n".join(lines)
