"""The one JSON parser for files that may lie: a size cap, a nesting cap and a number-length cap.

A checkpoint's ``config.json`` and index, a safetensors header and a model folder's config come
from a download or a Hub repo, so they may be hostile: nested thousands deep (the C parser then
raises :class:`RecursionError`), carry a 50 000-digit number (``ValueError`` since Python 3.11),
or be gigabytes long. :func:`parse_bounded_json` turns each into :class:`JsonLimitError`, a
``ValueError`` whose message, a predicate ("is not valid JSON: …"), says what was refused, so
every caller wraps it in its area's error with one ``except ValueError`` — never a traceback,
never an allocation sized by the file.
"""

from __future__ import annotations

import json
from typing import Any

MAX_JSON_BYTES = 64 * 1024 * 1024
"""Larger than any real config or index (DeepSeek V3's 91 000-tensor index is about 9 MB)."""
MAX_JSON_DEPTH = 64
"""Real configs nest three or four deep; anything past this is not a model's metadata."""


class JsonLimitError(ValueError):
    """The text is not JSON, or passes one of the limits above; the message says which."""


def parse_bounded_json(
    raw: bytes | str, max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH
) -> Any:
    """``raw`` parsed, or :class:`JsonLimitError` naming the problem in a few words."""
    if len(raw) > max_bytes:
        raise JsonLimitError(f"is {len(raw)} bytes long, more than the {max_bytes} allowed")
    try:
        value = json.loads(raw)
    except RecursionError:
        raise JsonLimitError(f"nests deeper than the {max_depth} levels allowed") from None
    except ValueError as exc:  # JSONDecodeError, bad UTF-8, a number of thousands of digits
        raise JsonLimitError(f"is not valid JSON: {_short(str(exc))}") from None
    if _depth_passes(value, max_depth):
        raise JsonLimitError(f"nests deeper than the {max_depth} levels allowed")
    return value


def _depth_passes(value: Any, max_depth: int) -> bool:
    """Whether ``value`` nests more than ``max_depth`` containers deep (walked, not recursed)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _short(message: str, limit: int = 120) -> str:
    return message if len(message) <= limit else message[:limit] + "…"
