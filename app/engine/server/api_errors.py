"""OpenAI's error body, so clients (the ``openai`` package included) raise their usual exceptions.

``{"error": {"message": …, "type": …, "param": …, "code": …}}`` with the HTTP status that the
OpenAI API uses for the same situation.
"""

from __future__ import annotations

from typing import Any


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
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


def bad_request(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code="invalid_value" if param else None)


def unknown_model(requested: str, served: str) -> ApiError:
    return ApiError(
        404,
        f"The model '{requested}' does not exist on this server; it serves '{served}' "
        "(GET /v1/models lists it).",
        param="model",
        code="model_not_found",
    )


def bad_api_key() -> ApiError:
    return ApiError(
        401,
        "Incorrect or missing API key: send the key this server was started with "
        "(serve --api-key) as 'Authorization: Bearer KEY'.",
        code="invalid_api_key",
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
