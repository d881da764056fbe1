"""A reply cut into prose and fenced code, so code can be shown in its own highlighted box.

CommonMark fences only: a line of three or more backticks or tildes, indented at most three
spaces, optionally followed by an info string whose first word is the language; the fence
closes on a line of the same character at least as long. A fence still open at the end (a
reply that is streaming, or one cut off by max tokens) runs to the end of the text, so a
half-written code block shows as code while it is being written. Fences indented deeper (inside
list items) stay part of the prose and are rendered by the Markdown view.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_OPENING_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)$")


@dataclass(frozen=True)
class Segment:
    """Prose (``language`` None) or a code block's exact code (no fences) and language."""

    text: str
    language: str | None = None
    closed: bool = True
    """False for a code block whose closing fence has not been written (yet)."""

    @property
    def is_code(self) -> bool:
        return self.language is not None


def split_reply(markdown: str) -> tuple[Segment, ...]:
    """The reply's prose and code blocks, in order; empty prose between blocks is dropped."""
    segments: list[Segment] = []
    prose: list[str] = []
    lines = markdown.split("\n")
    index = 0
    while index < len(lines):
        opening = _OPENING_FENCE.match(lines[index])
        if opening is None or (opening["fence"][0] == "`" and "`" in opening["info"]):
            prose.append(lines[index])
            index += 1
            continue
        _flush_prose(prose, segments)
        fence = opening["fence"]
        closing = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        code: list[str] = []
        index += 1
        while index < len(lines) and closing.match(lines[index]) is None:
            code.append(lines[index])
            index += 1
        closed = index < len(lines)
        index += 1
        info = opening["info"].strip()
        segments.append(Segment("\n".join(code), info.split()[0] if info else "", closed))
    _flush_prose(prose, segments)
    return tuple(segments)


def _flush_prose(prose: list[str], segments: list[Segment]) -> None:
    text = "\n".join(prose)
    if text.strip():
        segments.append(Segment(text))
    prose.clear()
