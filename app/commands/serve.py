"""``mtp-studio serve``: an OpenAI- and Anthropic-compatible server for one model, with MTP
statistics.

Loopback only unless ``--api-key`` (or ``MTP_STUDIO_API_KEY``) is given. Once the model is loaded
and the port is bound it prints one ``listening on URL`` line on stderr (the Server panel and the
tests wait for it), then one line per request (``--log-format json``: one JSON object per line).
A worker killed by an illegal instruction (a llama.cpp build this CPU cannot run) fails its
request with 503 and stops the server with that error and its advice (exit status 2): every
later request would crash the same way.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path

import uvicorn

from app.commands.chat import (
    add_drafter_argument,
    add_load_arguments,
    depth_argument,
    describe_drafting,
    describe_images,
    describe_load,
    load_plan,
)
from app.engine.chat.context_choice import LoadPlan
from app.engine.errors import ServerError, UnrunnableBuildError
from app.engine.runtime.backends.choice import BACKEND_CHOICES
from app.engine.runtime.chat_format.images import ImageLimits
from app.engine.runtime.core.backend import LoadSettings, ModelInfo
from app.engine.runtime.core.demo_model import demo_model_path
from app.engine.runtime.process.client import RuntimeClient
from app.engine.runtime.process.prompt_counter import PromptCounter
from app.engine.runtime.speculative.depth_policy import AUTO, AUTO_MAX_DEPTH, DEFAULT_MTP_DEPTH
from app.engine.server.app import build_app
from app.engine.server.core.client_snippets import anthropic_base_url
from app.engine.server.core.config import (
    DEFAULT_HOST,
    DEFAULT_MAX_BODY_MIB,
    DEFAULT_PORT,
    DEFAULT_QUEUE_SIZE,
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_CLIENT,
    READ_SECONDS,
    ServerConfig,
)
from app.engine.server.core.connections import ConnectionGuard, ConnectionLimits, guarded_protocol
from app.engine.server.core.depth import deepest
from app.engine.server.core.images import DEFAULT_MAX_IMAGES, ImageRules
from app.engine.server.core.metrics import ServerMetrics
from app.engine.server.core.request_log import RequestLogEntry
from app.engine.server.core.scheduler import Scheduler

API_KEY_VARIABLE = "MTP_STUDIO_API_KEY"
LISTENING = "listening on"
SHUTDOWN_GRACE_SECONDS = 5


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="serve a model over OpenAI- and Anthropic-compatible HTTP APIs",
        description=(
            "Serve one model at /v1/chat/completions, /v1/completions, /v1/responses and "
            "/v1/models (OpenAI; also without /v1) and /v1/messages and /v1/messages/count_tokens "
            "(Anthropic), plus /health and Prometheus /metrics, with MTP speculative decoding. "
            "The model answers whatever model name a request gives. Every reply carries its MTP "
            "statistics in an 'mtp' object. Requests run one at a time, the rest wait in a FIFO."
        ),
    )
    parser.add_argument("--model", type=Path, help="a .gguf model (default: the bundled demo)")
    parser.add_argument("--backend", choices=BACKEND_CHOICES, default="auto")
    add_drafter_argument(parser)
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"default {DEFAULT_HOST} (loopback)")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}; 0 = any free port"
    )
    parser.add_argument(
        "--api-key",
        metavar="KEY",
        help=f"require 'Authorization: Bearer KEY' (or set {API_KEY_VARIABLE}); needed for any "
        "non-loopback --host",
    )
    parser.add_argument(
        "--mtp-depth",
        type=depth_argument,
        default=DEFAULT_MTP_DEPTH,
        metavar="K|auto",
        help=(
            "tokens drafted per cycle unless a request sets mtp_depth; 0 = plain decoding; auto = "
            f"chosen before each cycle, 0 to {AUTO_MAX_DEPTH}, from the measured acceptance and "
            f"cycle times, remembered per model and machine (default {DEFAULT_MTP_DEPTH}). A "
            "request's mtp_depth may be auto or 0 to the larger of K and "
            f"{LoadSettings().max_draft_depth}"
        ),
    )
    parser.add_argument(
        "--queue-size",
        type=int,
        default=DEFAULT_QUEUE_SIZE,
        metavar="N",
        help=f"requests that may wait; more get 503 + Retry-After (default {DEFAULT_QUEUE_SIZE})",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        metavar="N",
        help="reply length for a request that sets none (default: up to the context size)",
    )
    parser.add_argument(
        "--max-body-mib",
        type=int,
        default=DEFAULT_MAX_BODY_MIB,
        metavar="MIB",
        help=f"larger request bodies get 413 (default {DEFAULT_MAX_BODY_MIB})",
    )
    _add_browser_arguments(parser)
    _add_image_arguments(parser)
    add_load_arguments(parser)
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="request log on stderr: a short line, or one JSON object per line",
    )
    parser.set_defaults(func=run)


def _add_browser_arguments(parser: argparse.ArgumentParser) -> None:
    """Who may reach the server from a web browser: CORS origins and extra Host names."""
    parser.add_argument(
        "--cors",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let web pages from ORIGIN (e.g. http://localhost:3000, or *) call the server; "
        "repeat for several",
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a name besides localhost that requests may give in their Host header (e.g. the "
        "name of a reverse proxy in front of a loopback server); repeat for several",
    )


def _add_image_arguments(parser: argparse.ArgumentParser) -> None:
    """What a request's images may be (docs/vision.md)."""
    parser.add_argument(
        "--max-images",
        type=int,
        default=DEFAULT_MAX_IMAGES,
        metavar="N",
        help=f"images one request may carry (default {DEFAULT_MAX_IMAGES}); each image may be at "
        f"most {ImageLimits().describe()}",
    )
    parser.add_argument(
        "--allow-remote-images",
        action="store_true",
        help="fetch http(s) image URLs that requests name (off: only inline data: URLs and "
        "base64 images; a server that fetches any URL can be made to read your local network)",
    )


def run(args: argparse.Namespace) -> int:
    model = args.model if args.model is not None else demo_model_path()
    config = ServerConfig(
        model_path=model,
        model_id=model.stem if model.suffix == ".gguf" else model.name,
        host=args.host,
        port=args.port,
        api_key=args.api_key or os.environ.get(API_KEY_VARIABLE) or None,
        mtp_depth=args.mtp_depth,
        queue_size=args.queue_size,
        default_max_tokens=args.max_tokens,
        max_body_bytes=args.max_body_mib * 2**20,
        cors_origins=tuple(args.cors),
        images=ImageRules(max_images=args.max_images, allow_remote=args.allow_remote_images),
        allowed_hosts=tuple(args.allow_host),
    )
    plan = load_plan(
        args,
        model,
        max_draft_depth=max(deepest(config.mtp_depth), LoadSettings().max_draft_depth),
        error=ServerError,
    )
    listener = _bind(config.host, config.port)
    emit = _log_writer(args.log_format)
    unrunnable: list[UnrunnableBuildError] = []

    def stop_serving(error: UnrunnableBuildError) -> None:
        unrunnable.append(error)
        server.should_exit = True  # uvicorn's loop sees it within 0.1 s

    with RuntimeClient(model, backend=args.backend, settings=plan.settings) as client:
        info = client.load()
        counter = PromptCounter(client.choice.name, model)
        metrics = ServerMetrics(lambda: scheduler.waiting, lambda: scheduler.busy)
        scheduler = Scheduler(
            client,
            config.queue_size,
            on_finished=metrics.record_generation,
            on_unrunnable=stop_serving,
        )
        app = build_app(config, scheduler, metrics, emit, model_info=info, prompt_counter=counter)
        scheduler.start()
        port = listener.getsockname()[1]
        url = dataclasses.replace(config, port=port).url
        _announce(args.log_format, url, config, info, plan)
        limits = ConnectionLimits(READ_SECONDS, MAX_CONNECTIONS_PER_CLIENT, MAX_CONNECTIONS)
        server = uvicorn.Server(
            uvicorn.Config(
                app,
                http=guarded_protocol(ConnectionGuard(limits)),
                log_level="warning",
                access_log=False,
                timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
            )
        )
        try:
            server.run(sockets=[listener])
        finally:
            scheduler.stop()
            counter.close()
    if unrunnable:  # no server that crashes on every request: stop, say why and what to do
        raise unrunnable[0]
    return 0


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before the model loads so a taken port fails fast."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as exc:
        listener.close()
        raise ServerError(
            f"cannot listen on {host}:{port} ({exc.strerror}): pick another --port, or stop the "
            "program that uses it"
        ) from None
    listener.listen(128)
    return listener


def _announce(
    log_format: str, url: str, config: ServerConfig, info: ModelInfo, plan: LoadPlan
) -> None:
    key = "API key required" if config.api_key else "no API key"
    if log_format == "json":
        event = {
            "event": "listening",
            "url": url,
            "anthropic_url": anthropic_base_url(url),
            "model": config.model_id,
            "mtp_depth": config.mtp_depth,
            "context_length": info.context_length,
            "kv_cache_type": plan.settings.kv_cache_type,
            "flash_attention": plan.settings.flash_attention,
            "state_cache_mib": plan.settings.state_cache_mib,
            "projector": str(info.projector) if info.projector else None,
        }
        print(json.dumps(event), file=sys.stderr)
    else:
        print(
            f"mtp-studio serve: {LISTENING} {url} · model {config.model_id} · "
            f"{_describe_depth(config, info)} · {key}",
            file=sys.stderr,
        )
        print(
            f"mtp-studio serve: Anthropic clients and Claude Code: base URL "
            f"{anthropic_base_url(url)} (POST /v1/messages)",
            file=sys.stderr,
        )
        print(f"mtp-studio serve: {describe_load(plan, info)}", file=sys.stderr)
        print(f"mtp-studio serve: {describe_images(info)}", file=sys.stderr)
    sys.stderr.flush()


def _describe_depth(config: ServerConfig, info: ModelInfo) -> str:
    if not info.mtp_available:
        return f"plain decoding ({info.mtp_unavailable_reason})"
    if config.mtp_depth == AUTO:
        depth = f"auto (0–{AUTO_MAX_DEPTH}, chosen each cycle)"
    else:
        depth = str(config.mtp_depth)
    return f"MTP depth {depth} ({describe_drafting(info)})"


def _log_writer(log_format: str) -> Callable[[RequestLogEntry], None]:
    def emit(entry: RequestLogEntry) -> None:
        print(
            entry.to_json() if log_format == "json" else entry.to_text(),
            file=sys.stderr,
            flush=True,
        )

    return emit
