"""What a remote server sends, checked before use: bounded reads, and counts, numbers and text
that are what they claim to be.

Why: ``chat --endpoint`` talks to a server someone else runs. It sent ``"choices": 5``,
``"drafted_by_depth": ["x"]`` or ``[1e999]``, events nested thousands deep, or a line of 6 GB
without a newline, and the CLI ended in one of eight tracebacks or a MemoryError. Every value is
read here instead: a malformed reply is a :class:`RemoteError` naming the field, a missing or
nonsense statistic is simply not reported, and no read holds more than
:data:`MAX_LINE_BYTES` (a line of the event stream) or :data:`MAX_RESPONSE_BYTES` (a whole JSON
reply, a /metrics page) in memory.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import httpx2

from app.engine.errors import RemoteError

MAX_LINE_BYTES = 8 * 2**20
"""One server-sent event line; a chunk of a reply is a few hundred bytes."""
MAX_RESPONSE_BYTES = 16 * 2**20
"""A whole non-streamed reply (/models, /metrics, an error body)."""
MAX_COUNT = 2**53
SHOWN_CHARACTERS = 300


def lines(response: httpx2.Response, url: str) -> Iterator[str]:
    """The response's lines (CR, LF or CRLF ends), none longer than :data:`MAX_LINE_BYTES`."""
    pending = bytearray()
    for chunk in response.iter_bytes():
        *complete, rest = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        if complete:
            complete[0] = bytes(pending) + complete[0]
            pending = bytearray()
        for line in complete:
            yield line.decode("utf-8", "replace")
        pending += rest
        if len(pending) > MAX_LINE_BYTES:
            raise RemoteError(
                f"{url} sent a line longer than {MAX_LINE_BYTES // 2**20} MiB without ending it; "
                "this is not an OpenAI-compatible event stream"
            )
    if pending:
        yield pending.decode("utf-8", "replace")


def body(response: httpx2.Response, url: str) -> bytes:
    """The whole body, refused past :data:`MAX_RESPONSE_BYTES`."""
    received = bytearray()
    for chunk in response.iter_bytes():
        received += chunk
        if len(received) > MAX_RESPONSE_BYTES:
            raise RemoteError(
                f"{url} sent more than {MAX_RESPONSE_BYTES // 2**20} MiB; check the URL"
            )
    return bytes(received)


def parse_json(raw: bytes | str, url: str) -> Any:
    try:
        return json.loads(raw)
    except RecursionError:
        raise RemoteError(f"{url} sent JSON nested too deeply to read") from None
    except ValueError:
        raise RemoteError(f"{url} sent something that is not JSON: {shown(raw)}") from None


def count(value: Any) -> int | None:
    """A token or draft count: a whole number from 0 to 2^53, else None."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
        return value
    return None


def counts(value: Any) -> tuple[int, ...] | None:
    """A list of counts (drafted by depth), or None when it is not one."""
    if not isinstance(value, list):
        return None
    found = [count(item) for item in value]
    return None if any(item is None for item in found) else tuple(found)  # type: ignore[misc]


def rate(value: Any) -> float | None:
    """A positive finite number (tokens per second), else None."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
        if math.isfinite(number) and number > 0:
            return number
    return None


def shown(value: Any) -> str:
    """A value as it may appear in a message: text or a number, cut short (a list or an object
    is named by its type: printing one nested deeply would itself fail)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str | int | float | bool) and value is not None:
        return f"(a JSON {'array' if isinstance(value, list) else 'object'})"
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= SHOWN_CHARACTERS else text[:SHOWN_CHARACTERS] + "…"
