"""The Starlette application: routes, API-key check, OpenAI errors, streaming and cancellation.

``POST /v1/chat/completions`` and ``POST /v1/completions`` (whole or streamed as server-sent
events), ``GET /v1/models``, ``GET /health`` (no key needed) and ``GET /metrics``. A request goes
to the :class:`Scheduler`; a client that disconnects — mid-stream or while waiting for a whole
reply — cancels its generation. Stop sequences end the generation as soon as they appear.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from app.engine.runtime.backend import ModelInfo
from app.engine.runtime.request import MAX_DRAFT_DEPTH, GenerationResult, TokenChunk
from app.engine.server import replies
from app.engine.server.api_errors import (
    ApiError,
    bad_api_key,
    bad_request,
    queue_full,
    unknown_model,
)
from app.engine.server.config import ServerConfig
from app.engine.server.metrics import CONTENT_TYPE, ServerMetrics
from app.engine.server.parsing import (
    ParsedRequest,
    RequestDefaults,
    parse_chat_body,
    parse_completion_body,
)
from app.engine.server.request_log import RequestLogEntry
from app.engine.server.scheduler import Job, JobFailed, QueueFull, Scheduler
from app.engine.server.stop_strings import StopScanner
from app.engine.server.tool_fields import (
    TOOL_CALLS_REASON,
    StreamedCalls,
    parses_calls,
    whole_message,
)

CLIENT_GONE_STATUS = 499  # nginx's "client closed request", for the log only
Handler = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True)
class Finished:
    result: GenerationResult
    stopped_by_sequence: bool


class ClientGone(Exception):
    """The client disconnected before its whole reply was ready."""


class _Server:
    def __init__(
        self,
        config: ServerConfig,
        scheduler: Scheduler,
        metrics: ServerMetrics,
        log: Callable[[RequestLogEntry], None],
        model_info: ModelInfo,
    ) -> None:
        self.config = config
        self.scheduler = scheduler
        self.metrics = metrics
        self.log = log
        self.mtp_layers = model_info.mtp_layers
        self.request_defaults = RequestDefaults(
            depth=config.mtp_depth,
            max_tokens=config.default_max_tokens,
            # without a usable head every depth decodes plainly (the reply's note says why)
            max_depth=model_info.max_draft_depth if model_info.mtp_available else MAX_DRAFT_DEPTH,
        )
        self.started = int(time.time())

    # --- plumbing -------------------------------------------------------------------------

    def endpoint(self, name: str, handler: Handler, *, needs_key: bool = True) -> Handler:
        async def wrapped(request: Request) -> Response:
            started = time.monotonic()
            try:
                if needs_key:
                    self._authorise(request)
                response = await handler(request)
            except ApiError as error:
                response = JSONResponse(error.body(), error.status, headers=error.headers)
                self._log_plain(request, response.status_code, started, error.message)
            else:
                logged = getattr(request.state, "logged", False)
                if not isinstance(response, StreamingResponse) and not logged:
                    self._log_plain(request, response.status_code, started)
            self.metrics.record_request(name, response.status_code)
            return response

        return wrapped

    def _authorise(self, request: Request) -> None:
        key = self.config.api_key
        if key is None:
            return
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.encode(), key.encode()):
            raise bad_api_key()

    def _log_plain(
        self, request: Request, status: int, started: float, error: str | None = None
    ) -> None:
        self.log(
            RequestLogEntry(
                request.method, request.url.path, status, time.monotonic() - started, error=error
            )
        )

    # --- simple endpoints -------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        request.state.logged = True  # polled often: kept out of the request log
        return JSONResponse(
            {
                "status": "ok",
                "model": self.config.model_id,
                "generating": self.scheduler.busy,
                "queue_length": self.scheduler.waiting,
            }
        )

    async def metrics_text(self, request: Request) -> Response:
        request.state.logged = True
        return Response(self.metrics.render(), media_type=CONTENT_TYPE)

    async def models(self, request: Request) -> Response:
        request.state.logged = False
        return JSONResponse({"object": "list", "data": [self._model_card()]})

    def _model_card(self) -> dict[str, Any]:
        return {
            "id": self.config.model_id,
            "object": "model",
            "created": self.started,
            "owned_by": "mtp-studio",
            replies.MTP_EXTENSION: {"layers": self.mtp_layers, "depth": self.config.mtp_depth},
        }

    # --- generation -------------------------------------------------------------------------

    async def chat_completions(self, request: Request) -> Response:
        return await self._generate(request, chat=True)

    async def completions(self, request: Request) -> Response:
        return await self._generate(request, chat=False)

    async def _generate(self, request: Request, *, chat: bool) -> Response:
        request.state.logged = False
        started = time.monotonic()
        parse = parse_chat_body if chat else parse_completion_body
        parsed = parse(await _json_body(request), self.request_defaults)
        if parsed.model not in (None, self.config.model_id):
            raise unknown_model(parsed.model, self.config.model_id)
        try:
            job = self.scheduler.submit(parsed.generation)
        except QueueFull as full:
            raise queue_full(full.waiting, full.retry_after_seconds) from None
        reply_id = replies.new_id("chatcmpl" if chat else "cmpl")
        if parsed.stream:
            events = self._stream(request, job, parsed, reply_id, started, chat=chat)
            return StreamingResponse(events, media_type="text/event-stream")
        return await self._whole(request, job, parsed, reply_id, started, chat=chat)

    async def _whole(
        self,
        request: Request,
        job: Job,
        parsed: ParsedRequest,
        reply_id: str,
        started: float,
        *,
        chat: bool,
    ) -> Response:
        collecting = asyncio.ensure_future(_collect(job, parsed.stop))
        gone = asyncio.ensure_future(_wait_for_disconnect(request))
        try:
            await asyncio.wait({collecting, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if not collecting.done():
            job.cancel()
            collecting.cancel()
            request.state.logged = True
            self._log_plain(request, CLIENT_GONE_STATUS, started, "client disconnected")
            return Response(status_code=CLIENT_GONE_STATUS)
        text, finished = collecting.result()
        reason = replies.finish_reason(finished.result, finished.stopped_by_sequence)
        model = self.config.model_id
        if chat:
            body = replies.chat_completion(reply_id, model, text, finished.result, reason)
            message, called = whole_message(text, parsed.generation)
            body["choices"][0]["message"] = message
            if called:
                reason = body["choices"][0]["finish_reason"] = TOOL_CALLS_REASON
        else:
            body = replies.text_completion(reply_id, model, text, reason, finished.result)
        self._log_generation(request, started, finished.result, reason)
        return JSONResponse(body)

    async def _stream(
        self,
        request: Request,
        job: Job,
        parsed: ParsedRequest,
        reply_id: str,
        started: float,
        *,
        chat: bool,
    ) -> AsyncIterator[str]:
        model = self.config.model_id
        finished: Finished | None = None
        try:
            if chat:
                yield _sse(
                    replies.chat_chunk(reply_id, model, {"role": "assistant", "content": ""})
                )
            calls = StreamedCalls() if chat and parses_calls(parsed.generation) else None
            async for piece in _pieces(job, parsed.stop):
                if isinstance(piece, Finished):
                    finished = piece
                    break
                if calls is not None:
                    for delta in calls.feed(piece):
                        yield _sse(replies.chat_chunk(reply_id, model, delta))
                elif chat:
                    yield _sse(replies.chat_chunk(reply_id, model, {"content": piece}))
                else:
                    yield _sse(replies.text_completion(reply_id, model, piece))
            assert finished is not None
            reason = replies.finish_reason(finished.result, finished.stopped_by_sequence)
            if calls is not None:
                for delta in calls.finish():
                    yield _sse(replies.chat_chunk(reply_id, model, delta))
                reason = TOOL_CALLS_REASON if calls.had_calls else reason
            result = finished.result
            if chat:
                yield _sse(replies.chat_chunk(reply_id, model, {}, reason, result))
            else:
                yield _sse(replies.text_completion(reply_id, model, "", reason, result))
            if parsed.include_usage_chunk:
                object_name = "chat.completion.chunk" if chat else "text_completion"
                yield _sse(replies.usage_chunk(reply_id, model, result, object_name))
            yield "data: [DONE]\n\n"
            self._log_generation(request, started, result, reason)
        except ApiError as error:  # the generation failed after the 200 went out
            yield _sse(error.body())
            self._log_plain(request, error.status, started, error.message)
        except asyncio.CancelledError:  # the client disconnected
            self._log_plain(request, CLIENT_GONE_STATUS, started, "client disconnected")
            raise
        finally:
            if finished is None:
                job.cancel()

    def _log_generation(
        self, request: Request, started: float, result: GenerationResult, reason: str
    ) -> None:
        request.state.logged = True
        self.log(
            RequestLogEntry.for_generation(
                request.method, request.url.path, time.monotonic() - started, result, reason
            )
        )


async def _json_body(request: Request) -> Any:
    try:
        return json.loads(await request.body())
    except ValueError as exc:
        raise bad_request(f"the request body is not valid JSON: {exc}") from None


async def _pieces(job: Job, stops: tuple[str, ...]) -> AsyncIterator[str | Finished]:
    """The text to send as it is released by the stop scanner, then :class:`Finished`."""
    scanner = StopScanner(stops)
    while True:
        event = await job.events.get()
        if isinstance(event, TokenChunk):
            text = scanner.feed(event.text)
            if scanner.stopped:
                job.cancel()
            if text:
                yield text
        elif isinstance(event, GenerationResult):
            tail = scanner.flush()
            if tail:
                yield tail
            yield Finished(event, scanner.stopped)
            return
        else:
            raise _generation_failed(event)


async def _collect(job: Job, stops: tuple[str, ...]) -> tuple[str, Finished]:
    texts: list[str] = []
    async for piece in _pieces(job, stops):
        if isinstance(piece, Finished):
            return "".join(texts), piece
        texts.append(piece)
    raise AssertionError("a job always ends with a result or a failure")


async def _wait_for_disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _generation_failed(failure: JobFailed) -> ApiError:
    if failure.user_error:
        return ApiError(400, failure.message)
    return ApiError(500, "the inference worker hit a bug; see the server log", type_="server_error")


def _sse(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data)}\n\n"


def build_app(
    config: ServerConfig,
    scheduler: Scheduler,
    metrics: ServerMetrics,
    log: Callable[[RequestLogEntry], None],
    *,
    model_info: ModelInfo,
) -> Starlette:
    server = _Server(config, scheduler, metrics, log, model_info)

    async def not_found(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        error = ApiError(exc.status_code, f"{request.method} {request.url.path}: {exc.detail}")
        return JSONResponse(error.body(), exc.status_code)

    routes = [
        Route("/health", server.endpoint("health", server.health, needs_key=False)),
        Route("/metrics", server.endpoint("metrics", server.metrics_text)),
        Route("/v1/models", server.endpoint("models", server.models)),
        Route(
            "/v1/chat/completions",
            server.endpoint("chat_completions", server.chat_completions),
            methods=["POST"],
        ),
        Route(
            "/v1/completions",
            server.endpoint("completions", server.completions),
            methods=["POST"],
        ),
    ]
    return Starlette(routes=routes, exception_handlers={HTTPException: not_found})
