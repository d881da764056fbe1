"""Client-sent values as they may appear in an error reply or a log line: short and inert.

A 400 that quotes a whole 5 MB field costs as much as the request, a ``model`` holding a newline
would forge a line in the request log, and a lone surrogate could not be sent at all.
:func:`echo` keeps a short prefix of a value's JSON form, with control characters and surrogates
removed, so a reply can still name what was wrong.
"""

from __future__ import annotations

import json
import re
from typing import Any

ECHO_CHARACTERS = 60
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def clean(text: str, limit: int = ECHO_CHARACTERS) -> str:
    """``text`` without control characters, cut to ``limit`` characters (marked with …)."""
    text = _CONTROL.sub("", text)
    return text if len(text) <= limit else text[:limit] + "…"


def echo(value: Any, limit: int = ECHO_CHARACTERS) -> str:
    """A short, single-line JSON rendering of ``value`` for an error message."""
    try:
        rendered = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        rendered = repr(value)
    return clean(rendered[: limit * 4], limit)
