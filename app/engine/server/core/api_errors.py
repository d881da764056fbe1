"""Error replies in the shape each API's clients expect, so they raise their usual exceptions.

OpenAI: ``{"error": {"message": …, "type": …, "param": …, "code": …}}``; Anthropic:
``{"type": "error", "error": {"type": …, "message": …}}``; each with the HTTP status that API
uses for the same situation. Client-sent values in messages go through :func:`echo.echo`.
"""

from __future__ import annotations

from typing import Any

from app.engine.server.core.echo import echo

ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "invalid_request_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


class ApiError(Exception):
    """An error reply: raise it anywhere in a request handler."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type_: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
        log_detail: str | None = None,
        anthropic_message: str | None = None,
    ) -> None:
        """``anthropic_message``: the words Anthropic's clients look for, where they differ."""
        super().__init__(message)
        self.log_detail = log_detail or message
        """What the request log says (a worker bug's traceback, where the reply says less)."""
        self.status = status
        self.message = message
        self.type = type_
        self.param = param
        self.code = code
        self.headers = headers or {}
        self.anthropic_message = anthropic_message or message

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def anthropic_body(self) -> dict[str, Any]:
        error_type = ANTHROPIC_ERROR_TYPES.get(self.status, "api_error")
        return {"type": "error", "error": {"type": error_type, "message": self.anthropic_message}}


def bad_request(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code="invalid_value" if param else None)


def unsupported(name: str, value: Any, why: str) -> ApiError:
    """A field this server understands but cannot honour: refused, never silently ignored."""
    return bad_request(f"'{name}' {echo(value)} is not supported: {why}", name)


def bad_api_key() -> ApiError:
    return ApiError(
        401,
        "Incorrect or missing API key: send the key this server was started with "
        "(serve --api-key) as 'Authorization: Bearer KEY' or 'x-api-key: KEY'.",
        code="invalid_api_key",
    )


def body_too_large(limit_bytes: int) -> ApiError:
    return ApiError(
        413,
        f"The request body is larger than this server accepts ({limit_bytes // 2**20} MiB); "
        "send a shorter request, or start the server with a larger --max-body-mib.",
        code="request_too_large",
    )


def queue_full(waiting: int, retry_after_seconds: int) -> ApiError:
    return ApiError(
        503,
        f"The server is busy: {waiting} request(s) are already waiting for the model. "
        f"Retry in about {retry_after_seconds} s.",
        type_="server_error",
        code="queue_full",
        headers={"Retry-After": str(retry_after_seconds)},
    )
