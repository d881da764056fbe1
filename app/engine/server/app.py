"""The Starlette application: both APIs' routes over one :class:`ApiServer`.

OpenAI: ``POST /v1/chat/completions`` and ``POST /v1/completions`` (also without ``/v1``),
``GET /v1/models`` and ``GET /v1/models/{id}`` (:mod:`.openai.routes`). Anthropic:
``POST /v1/messages`` and ``POST /v1/messages/count_tokens`` (:mod:`.anthropic.routes`). Plus
``GET /health`` (no key needed), ``GET /metrics``, ``GET /v1/status`` and
``POST /models/unload``. Bodies are capped (413); errors take the shape of the API called.
"""

from __future__ import annotations

from collections.abc import Callable

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
from app.engine.server.core.echo import clean
from app.engine.server.core.metrics import ServerMetrics
from app.engine.server.core.model_directory import ModelDirectory
from app.engine.server.core.request_log import RequestLogEntry
from app.engine.server.core.server import ANTHROPIC, OPENAI, ApiServer, Handler
from app.engine.server.openai.routes import OpenAiRoutes


def build_app(
    config: ServerConfig,
    models: ModelDirectory,
    metrics: ServerMetrics,
    log: Callable[[RequestLogEntry], None],
) -> Starlette:
    server = ApiServer(config, models, metrics, log)
    openai = OpenAiRoutes(server)
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
