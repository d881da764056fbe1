"""The request body, read with a size cap: a 413 as soon as it grows past the cap.

Without a cap a client can send 50 MB of prompt and hold the server for the time it takes to
parse and tokenise it. The cap is checked against ``Content-Length`` before reading and again as
each piece arrives (a chunked upload has no length), so an oversized body is never held in full.
A client that disconnects mid-upload raises :class:`ClientGone`, answered quietly.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import ClientDisconnect, Request

from app.engine.server.core.api_errors import bad_request, body_too_large
from app.engine.server.core.generation_flow import ClientGone


async def json_body(request: Request, limit_bytes: int) -> Any:
    """The body parsed as JSON; 413 past ``limit_bytes``, 400 when it is not JSON."""
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
    try:
        return json.loads(received)
    except ValueError as exc:
        raise bad_request(f"the request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise bad_request("the request body is JSON nested too deeply to read") from None
