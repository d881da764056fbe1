"""The request body: read with a size cap on the event loop, decoded as JSON off it.

Without a cap a client can send 50 MB of prompt and hold the server for the time it takes to
parse and tokenise it. The cap is checked against ``Content-Length`` before reading and again as
each piece arrives (a chunked upload has no length), so an oversized body is never held in full.
A client that disconnects mid-upload raises :class:`ClientGone`, answered quietly.
:func:`decode_json` runs on a checking thread (:mod:`.offload`): decoding megabytes of JSON takes
tenths of a second. JSON may escape a lone UTF-16 surrogate (``"\\ud800"``), which no UTF-8 text
can hold: such a body is a 400 naming the field, not a 500 where the prompt is encoded.
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.requests import ClientDisconnect, Request

from app.engine.server.core.api_errors import bad_request, body_too_large
from app.engine.server.core.generation_flow import ClientGone

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


async def read_body(request: Request, limit_bytes: int) -> bytes:
    """The body's bytes; 413 past ``limit_bytes``."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit_bytes:
        raise body_too_large(limit_bytes)
    received = bytearray()
    try:
        async for piece in request.stream():
            received += piece
            if len(received) > limit_bytes:
                raise body_too_large(limit_bytes)
    except ClientDisconnect:
        raise ClientGone from None
    return bytes(received)


def decode_json(raw: bytes) -> Any:
    """``raw`` parsed as JSON; 400 when it is not JSON, nests too deeply or holds a lone
    surrogate."""
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise bad_request(f"the request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise bad_request("the request body is JSON nested too deeply to read") from None
    if _SURROGATE_ESCAPE.search(raw):  # only escapes can make one; a pair decodes to one
        where = _lone_surrogate(value)
        if where is not None:
            raise bad_request(
                f"'{where}' holds a lone UTF-16 surrogate (an unpaired \\ud800–\\udfff escape), "
                "which is not text: send valid Unicode",
                where,
            )
    return value


def _lone_surrogate(value: Any) -> str | None:
    """Where in ``value`` a string (or key) holds a lone surrogate, e.g. ``messages[0].content``."""
    pending: list[tuple[Any, str]] = [(value, "")]
    while pending:
        item, where = pending.pop()
        if isinstance(item, str):
            if not item.isascii() and not _encodable(item):
                return where or "(body)"
        elif isinstance(item, dict):
            for key, child in item.items():
                path = f"{where}.{key}" if where else key
                if not _encodable(key):
                    return path
                pending.append((child, path))
        elif isinstance(item, list):
            pending.extend((child, f"{where}[{index}]") for index, child in enumerate(item))
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
