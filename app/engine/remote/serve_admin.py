"""Another ``mtp-studio serve``'s status and its unload action, as ``mtp-studio ps`` and the
Server page ask for them.

``GET /v1/status`` says what the server has loaded and whom it serves; ``POST /models/unload``
unloads an idle model (docs/server-api.md#status-and-unloading). Both send the key when one is
given; every failure is a :class:`RemoteError` that says what to do.
"""

from __future__ import annotations

from typing import Any

import httpx2

from app.engine.errors import RemoteError

TIMEOUT_SECONDS = 10.0
API_KEY_HINT = "pass --api-key or set MTP_STUDIO_API_KEY"


def server_root(url: str) -> str:
    """``http://host:port`` from the server's URL, with or without ``/v1``."""
    return url.rstrip("/").removesuffix("/v1")


def fetch_status(url: str, api_key: str | None = None) -> dict[str, Any]:
    """The server's status object."""
    root = server_root(url)
    reply = _call("GET", f"{root}/v1/status", api_key)
    status = _json(reply)
    if not isinstance(status, dict) or not isinstance(status.get("loaded"), list):
        raise RemoteError(f"{root}/v1/status did not answer with a server status")
    return status


def unload(url: str, model: str, api_key: str | None = None) -> dict[str, Any]:
    """Ask the server to unload ``model`` now: its answer (``unloaded`` true or false)."""
    root = server_root(url)
    reply = _call("POST", f"{root}/models/unload", api_key, {"model": model})
    answer = _json(reply)
    if not isinstance(answer, dict):
        raise RemoteError(f"{root}/models/unload did not answer with an object")
    return answer


def _call(
    method: str, url: str, api_key: str | None, body: dict[str, Any] | None = None
) -> httpx2.Response:
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        reply = httpx2.request(method, url, headers=headers, json=body, timeout=TIMEOUT_SECONDS)
    except httpx2.HTTPError as exc:
        raise RemoteError(
            f"no server answers at {url} ({type(exc).__name__}): start one with mtp-studio "
            "serve, or give its URL"
        ) from None
    if reply.status_code == 401:
        raise RemoteError(f"{url} wants the server's API key: {API_KEY_HINT}")
    if reply.status_code != 200:
        message = _error_message(reply)
        raise RemoteError(f"{url} answered {reply.status_code}: {message}")
    return reply


def _json(reply: httpx2.Response) -> Any:
    try:
        return reply.json()
    except ValueError:
        return None


def _error_message(reply: httpx2.Response) -> str:
    data = _json(reply)
    error = data.get("error") if isinstance(data, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    if isinstance(message, str):
        return "".join(c for c in message[:300] if c.isprintable())
    return "is it an mtp-studio serve of this version?"
