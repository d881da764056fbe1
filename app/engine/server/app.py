"""The Starlette application: both APIs' routes over one :class:`ApiServer`.

OpenAI: ``POST /v1/chat/completions`` and ``POST /v1/completions`` (also without ``/v1``),
``GET /v1/models`` and ``GET /v1/models/{id}`` (:mod:`.openai.routes`); the Responses API:
``POST /v1/responses``, ``GET`` and ``DELETE /v1/responses/{id}`` (:mod:`.responses.routes`).
Anthropic: ``POST /v1/messages`` and ``POST /v1/messages/count_tokens``
(:mod:`.anthropic.routes`). Plus ``GET /health`` (no key needed), ``GET /metrics``,
``GET /v1/status`` and ``POST /models/unload``. Bodies are capped (413) and must be JSON (415),
the ``Host`` must be allowed (403); errors take the shape of the API called.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.engine.server.anthropic.routes import AnthropicRoutes
from app.engine.server.core.api_errors import ApiError
from app.engine.server.core.config import ServerConfig
from app.engine.server.core.connections import quiet_accept_errors
from app.engine.server.core.echo import clean
from app.engine.server.core.metrics import ServerMetrics
from app.engine.server.core.model_directory import ModelDirectory
from app.engine.server.core.request_log import RequestLogEntry
from app.engine.server.core.server import ANTHROPIC, OPENAI, ApiServer, Handler
from app.engine.server.openai.routes import OpenAiRoutes
from app.engine.server.responses.routes import ResponsesRoutes


def build_app(
    config: ServerConfig,
    models: ModelDirectory,
    metrics: ServerMetrics,
    log: Callable[[RequestLogEntry], None],
) -> Starlette:
    server = ApiServer(config, models, metrics, log)
    openai = OpenAiRoutes(server)
    anthropic = AnthropicRoutes(server)
    responses = ResponsesRoutes(server)

    async def not_found(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        error = ApiError(
            exc.status_code, f"{request.method} {clean(request.url.path)}: {exc.detail}"
        )
        return JSONResponse(error.body(), exc.status_code)

    def post(path: str, name: str, handler: Handler, dialect: str = OPENAI) -> Route:
        return Route(path, server.endpoint(name, handler, dialect=dialect), methods=["POST"])

    def kept(path: str, method: str, handler: Handler) -> Route:
        return Route(path, server.endpoint("responses", handler), methods=[method])

    routes = [
        Route("/health", server.endpoint("health", server.health, needs_key=False)),
        Route("/metrics", server.endpoint("metrics", server.metrics_text)),
        Route("/v1/status", server.endpoint("status", server.status)),
        post("/v1/models/unload", "unload", server.unload),
        post("/models/unload", "unload", server.unload),
        Route("/v1/models", server.endpoint("models", openai.models)),
        Route("/models", server.endpoint("models", openai.models)),
        Route("/v1/models/{model_id:path}", server.endpoint("models", openai.model)),
        Route("/models/{model_id:path}", server.endpoint("models", openai.model)),
        post("/v1/chat/completions", "chat_completions", openai.chat_completions),
        post("/chat/completions", "chat_completions", openai.chat_completions),
        post("/v1/completions", "completions", openai.completions),
        post("/completions", "completions", openai.completions),
        post("/v1/messages", "messages", anthropic.messages, ANTHROPIC),
        post("/v1/messages/count_tokens", "count_tokens", anthropic.count_tokens, ANTHROPIC),
        post("/v1/responses", "responses", responses.create),
        post("/responses", "responses", responses.create),
        kept("/v1/responses/{response_id}", "GET", responses.retrieve),
        kept("/responses/{response_id}", "GET", responses.retrieve),
        kept("/v1/responses/{response_id}", "DELETE", responses.delete),
        kept("/responses/{response_id}", "DELETE", responses.delete),
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

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        quiet_accept_errors(asyncio.get_running_loop())
        yield
        server.offload.close()

    return Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={HTTPException: not_found},
        lifespan=lifespan,
    )
