"""Text from a Hub, a remote server or a file, made safe to print on a terminal.

Why: a terminal obeys the control characters it is sent. A Hub file name holding ``ESC ] 0 ; …
BEL`` retitles the terminal window, ``ESC [ 2 J`` clears it, a carriage return overwrites what the
line said, and a right-to-left override makes ``exe.gguf`` read as ``fuug.exe``. Every CLI print of
text someone else wrote (repo ids, file names, labels, error messages, a remote model's reply)
goes through :func:`printable`, which shows each such character as its ``\\x1b``-style escape:
still visible (the user can see the name is odd), never obeyed.
"""

from __future__ import annotations

import re

_UNPRINTABLE = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_UNPRINTABLE_IN_TEXT = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def printable(text: object, *, multiline: bool = False) -> str:
    """``text`` (``str()`` of it) with control characters, bidirectional overrides and lone
    surrogates written as escapes; a tab is kept, and so are line ends when ``multiline``."""
    text = str(text)
    if multiline:
        return _UNPRINTABLE_IN_TEXT.sub(_escape, text.replace("\r\n", "\n"))
    return _UNPRINTABLE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
