"""The plumbing both APIs' routes share: the Host and API-key checks, the request log, body
reading and checking off the event loop, the request's model, its prompt check and its queue,
errors in the shape of the API called, and the endpoints that belong to neither API
(``/health``, ``/metrics``, ``/v1/status``, ``POST /models/unload``).

Each API's routes (:mod:`app.engine.server.openai.routes`,
:mod:`app.engine.server.anthropic.routes`) hold an :class:`ApiServer` and add their handlers;
:mod:`app.engine.server.app` wires them up.
"""

from __future__ import annotations

import dataclasses
import hmac
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from app.engine.runtime.chat_format.prompting import images_of
from app.engine.runtime.core.request import GenerationResult
from app.engine.server.core.api_errors import ApiError, bad_api_key, bad_request, queue_full
from app.engine.server.core.body import decode_json, read_body
from app.engine.server.core.config import CHECK_SECONDS, ServerConfig
from app.engine.server.core.echo import clean
from app.engine.server.core.generation_flow import CLIENT_GONE_STATUS, ClientGone
from app.engine.server.core.images import RequestImages, remote_urls
from app.engine.server.core.metrics import CONTENT_TYPE, ServerMetrics
from app.engine.server.core.model_directory import ModelDirectory, RequestModel
from app.engine.server.core.offload import Offloader
from app.engine.server.core.remote_images import fetch_images
from app.engine.server.core.request_fields import ParsedRequest, json_object, model_name
from app.engine.server.core.request_guard import check_host, check_json_content_type
from app.engine.server.core.request_log import RequestLogEntry
from app.engine.server.core.scheduler import Job, JobEvent, JobOrigin, QueueFull
from app.engine.server.core.server_status import server_status, unload_model
from app.engine.server.core.waiting_reply import HEADERS_AFTER_SECONDS, Waiting, first_or_waiting

LOGGED_ERROR_CHARACTERS = 300
Handler = Callable[[Request], Awaitable[Response]]
OPENAI, ANTHROPIC = "openai", "anthropic"
T = TypeVar("T")


class ApiServer:
    """The handlers and plumbing shared by both APIs' routes."""

    def __init__(
        self,
        config: ServerConfig,
        models: ModelDirectory,
        metrics: ServerMetrics,
        log: Callable[[RequestLogEntry], None],
    ) -> None:
        self.config = config
        self.models = models
        self.metrics = metrics
        self.log = log
        self.started = int(time.time())
        self.offload = Offloader(CHECK_SECONDS)

    # --- plumbing -------------------------------------------------------------------------

    def endpoint(
        self, name: str, handler: Handler, *, needs_key: bool = True, dialect: str = OPENAI
    ) -> Handler:
        async def wrapped(request: Request) -> Response:
            started = time.monotonic()
            try:
                check_host(request, self.config)
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
                passed_over=getattr(request.state, "passed_over", ()),
            )
        )

    def log_generation(
        self, request: Request, started: float, result: GenerationResult, reason: str
    ) -> None:
        request.state.logged = True
        entry = RequestLogEntry.for_generation(
            request.method, clean(request.url.path), time.monotonic() - started, result, reason
        )
        self.log(dataclasses.replace(entry, passed_over=getattr(request.state, "passed_over", ())))

    async def body(self, request: Request) -> Any:
        """The JSON body (415 unless sent as JSON), read here and decoded on a checking thread
        (:mod:`.offload`)."""
        check_json_content_type(request)
        raw = await read_body(request, self.config.max_body_bytes)
        return await self.offload.run(lambda: decode_json(raw))

    async def check(self, parse: Callable[[], T]) -> T:
        """``parse()`` — reading a body's fields, which may compile schemas, read tools and decode
        images — on a checking thread, within the time budget."""
        return await self.offload.run(parse)

    async def request_images(self, body: Any) -> RequestImages:
        """The reader of the body's images, with its remote URLs fetched when they are allowed."""
        rules = self.config.images
        if not rules.allow_remote:
            return RequestImages(rules)
        urls = await self.check(lambda: remote_urls(body))
        if len(urls) > rules.max_images:
            raise bad_request(
                f"the request names {len(urls)} image URLs; a request may hold at most "
                f"{rules.max_images} images",
                "messages",
            )
        return RequestImages(rules, await fetch_images(urls, rules.limits.max_bytes))

    async def model_for(self, body: Any) -> RequestModel:
        """The model the body's ``model`` names, with its queue (404 when it names none)."""
        return await self.models.model_for(model_name(json_object(body)))

    async def start(
        self,
        request: Request,
        parsed: ParsedRequest,
        target: RequestModel,
        endpoint: str,
        *,
        early: bool = True,
    ) -> tuple[Job, JobEvent | Waiting]:
        """Check that the prompt fits (the model's :class:`PromptCheck`, once it is loaded),
        queue the generation on its model and wait for its first event (see
        :func:`first_or_waiting`); with ``early``, a job still waiting for its turn after
        :data:`HEADERS_AFTER_SECONDS` is handed back as :class:`Waiting` so its reply starts."""
        if target.image_refusal and images_of(parsed.generation.messages):
            raise bad_request(target.image_refusal, "messages")
        request.state.passed_over = parsed.passed_over
        if target.prompts is not None:
            await target.prompts.check_fits(parsed)
        client = request.client
        origin = JobOrigin(
            endpoint, parsed.stream, f"{client.host}:{client.port}" if client else ""
        )
        try:
            job = target.scheduler.submit(parsed.generation, origin)
        except QueueFull as full:
            raise queue_full(full.waiting, full.retry_after_seconds) from None
        headers_after = HEADERS_AFTER_SECONDS if early else None
        return job, await first_or_waiting(request, job, target.scheduler, headers_after)

    # --- endpoints of neither API --------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        request.state.logged = True  # polled often: kept out of the request log
        models = self.models
        pinned = (
            models.catalogue.models[0].id if models.pinned and models.catalogue.models else None
        )
        return JSONResponse(
            {
                "status": "ok",
                "model": pinned,
                "models_loaded": list(models.pool.loaded_ids()),
                "generating": models.running > 0,
                "queue_length": models.waiting,
            }
        )

    async def status(self, request: Request) -> Response:
        """``GET /v1/status``: what is loaded, its slots and memory, and who is being served."""
        request.state.logged = True  # polled by the Server page and mtp-studio ps
        return JSONResponse(server_status(self.models, self.started))

    async def unload(self, request: Request) -> Response:
        """``POST /models/unload`` ``{"model": ID}``: unload an idle model now."""
        body = await self.body(request)
        return JSONResponse(unload_model(self.models, body))

    async def metrics_text(self, request: Request) -> Response:
        request.state.logged = True
        return Response(self.metrics.render(), media_type=CONTENT_TYPE)
