"""The Starlette application: routes, API-key check, error bodies, streaming and cancellation.

OpenAI: ``POST /v1/chat/completions`` and ``POST /v1/completions`` (also without ``/v1``, whole
or streamed as server-sent events) and ``GET /v1/models``. Anthropic: ``POST /v1/messages``
and ``POST /v1/messages/count_tokens`` (:mod:`anthropic_routes`). Plus ``GET /health`` (no key
needed) and ``GET /metrics``. A request goes to the :class:`Scheduler`; the reply starts only
once the generation has started, so an error known before any text is an HTTP 4xx; a client
that disconnects — while queued, mid-stream or while waiting for a whole reply — cancels its
generation. The one served model answers whatever model a request names, and says its own name.
Bodies are capped (413); errors take the shape of the API called.
"""

from __future__ import annotations

import hmac
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from app.engine.runtime.backend import ModelInfo
from app.engine.runtime.request import MAX_DRAFT_DEPTH, GenerationResult
from app.engine.server import replies
from app.engine.server.anthropic_routes import AnthropicRoutes
from app.engine.server.api_errors import ApiError, bad_api_key, queue_full
from app.engine.server.body import json_body
from app.engine.server.config import ServerConfig
from app.engine.server.echo import clean
from app.engine.server.generation_flow import (
    CLIENT_GONE_STATUS,
    ClientGone,
    Finished,
    collect_unless_gone,
    first_event,
    pieces,
)
from app.engine.server.metrics import CONTENT_TYPE, ServerMetrics
from app.engine.server.parsing import (
    ParsedRequest,
    RequestDefaults,
    parse_chat_body,
    parse_completion_body,
)
from app.engine.server.request_log import RequestLogEntry
from app.engine.server.scheduler import Job, JobEvent, QueueFull, Scheduler
from app.engine.server.tool_fields import (
    TOOL_CALLS_REASON,
    StreamedCalls,
    parses_calls,
    whole_message,
)

LOGGED_ERROR_CHARACTERS = 300
Handler = Callable[[Request], Awaitable[Response]]
OPENAI, ANTHROPIC = "openai", "anthropic"


class ApiServer:
    """The handlers and plumbing shared by both APIs' routes."""

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
            max_tokens=config.default_max_tokens or model_info.context_length,
            # without a usable head every depth decodes plainly (the reply's note says why)
            max_depth=model_info.max_draft_depth if model_info.mtp_available else MAX_DRAFT_DEPTH,
        )
        self.started = int(time.time())

    # --- plumbing -------------------------------------------------------------------------

    def endpoint(
        self, name: str, handler: Handler, *, needs_key: bool = True, dialect: str = OPENAI
    ) -> Handler:
        async def wrapped(request: Request) -> Response:
            started = time.monotonic()
            try:
                if needs_key:
                    self._authorise(request)
                response = await handler(request)
            except ApiError as error:
                body = error.anthropic_body() if dialect == ANTHROPIC else error.body()
                response = JSONResponse(body, error.status, headers=error.headers)
                self.log_plain(request, response.status_code, started, error.log_detail)
            except ClientGone:
                response = Response(status_code=CLIENT_GONE_STATUS)
                self.log_plain(request, CLIENT_GONE_STATUS, started, "client disconnected")
            else:
                logged = getattr(request.state, "logged", False)
                if not isinstance(response, StreamingResponse) and not logged:
                    self.log_plain(request, response.status_code, started)
            self.metrics.record_request(name, response.status_code)
            return response

        return wrapped

    def _authorise(self, request: Request) -> None:
        """The key as OpenAI clients send it (``Authorization: Bearer``) or Anthropic's
        (``x-api-key``)."""
        key = self.config.api_key
        if key is None:
            return
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            given = request.headers.get("x-api-key", "")
        if not hmac.compare_digest(given.encode(), key.encode()):
            raise bad_api_key()

    def log_plain(
        self, request: Request, status: int, started: float, error: str | None = None
    ) -> None:
        request.state.logged = True
        if error is not None:  # a worker's traceback: its last line says what failed
            error = clean(error.strip().splitlines()[-1], LOGGED_ERROR_CHARACTERS)
        self.log(
            RequestLogEntry(
                request.method,
                clean(request.url.path),
                status,
                time.monotonic() - started,
                error=error,
            )
        )

    def log_generation(
        self, request: Request, started: float, result: GenerationResult, reason: str
    ) -> None:
        request.state.logged = True
        self.log(
            RequestLogEntry.for_generation(
                request.method, clean(request.url.path), time.monotonic() - started, result, reason
            )
        )

    async def body(self, request: Request) -> Any:
        return await json_body(request, self.config.max_body_bytes)

    async def start(self, request: Request, parsed: ParsedRequest) -> tuple[Job, JobEvent]:
        """Queue the generation and wait for its first event (see :func:`first_event`)."""
        try:
            job = self.scheduler.submit(parsed.generation)
        except QueueFull as full:
            raise queue_full(full.waiting, full.retry_after_seconds) from None
        return job, await first_event(request, job)

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
            "description": (
                "The one model this server runs: requests naming any model are answered by it, "
                "and replies name it."
            ),
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
        parsed = parse(await self.body(request), self.request_defaults)
        job, first = await self.start(request, parsed)
        reply_id = replies.new_id("chatcmpl" if chat else "cmpl")
        if parsed.stream:
            events = self._stream(request, job, first, parsed, reply_id, started, chat=chat)
            return StreamingResponse(events, media_type="text/event-stream")
        text, finished = await collect_unless_gone(request, job, parsed.stop, first)
        reason = replies.finish_reason(finished.result, finished.stopped_by_sequence)
        model = self.config.model_id
        if chat:
            body = replies.chat_completion(reply_id, model, text, finished.result, reason)
            message, called = whole_message(text, parsed.generation)
            body["choices"][0]["message"] = message
            if called:
                reason = body["choices"][0]["finish_reason"] = TOOL_CALLS_REASON
        else:
            body = replies.text_completion(
                reply_id, model, text, reason, finished.result, whole=True
            )
        self.log_generation(request, started, finished.result, reason)
        return JSONResponse(body)

    async def _stream(
        self,
        request: Request,
        job: Job,
        first: JobEvent,
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
            async for piece in pieces(job, parsed.stop, first):
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
            self.log_generation(request, started, result, reason)
        except ApiError as error:  # the generation failed after the 200 went out
            yield _sse(error.body())
            self.log_plain(request, error.status, started, error.log_detail)
        except BaseException:  # the client disconnected (cancelled) or the send failed
            self.log_plain(request, CLIENT_GONE_STATUS, started, "client disconnected")
            raise
        finally:
            if finished is None:
                job.cancel()


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
    server = ApiServer(config, scheduler, metrics, log, model_info)
    anthropic = AnthropicRoutes(server)

    async def not_found(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        error = ApiError(
            exc.status_code, f"{request.method} {clean(request.url.path)}: {exc.detail}"
        )
        return JSONResponse(error.body(), exc.status_code)

    def post(path: str, name: str, handler: Handler, dialect: str = OPENAI) -> Route:
        return Route(path, server.endpoint(name, handler, dialect=dialect), methods=["POST"])

    routes = [
        Route("/health", server.endpoint("health", server.health, needs_key=False)),
        Route("/metrics", server.endpoint("metrics", server.metrics_text)),
        Route("/v1/models", server.endpoint("models", server.models)),
        Route("/models", server.endpoint("models", server.models)),
        post("/v1/chat/completions", "chat_completions", server.chat_completions),
        post("/chat/completions", "chat_completions", server.chat_completions),
        post("/v1/completions", "completions", server.completions),
        post("/completions", "completions", server.completions),
        post("/v1/messages", "messages", anthropic.messages, ANTHROPIC),
        post("/v1/messages/count_tokens", "count_tokens", anthropic.count_tokens, ANTHROPIC),
    ]
    middleware = []
    if config.cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(config.cors_origins),
                allow_methods=["GET", "POST", "OPTIONS"],
                allow_headers=["*"],
            )
        )
    return Starlette(
        routes=routes, middleware=middleware, exception_handlers={HTTPException: not_found}
    )
