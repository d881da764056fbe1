"""``mtp-studio serve``: an OpenAI- and Anthropic-compatible server for every model on disk (or one
pinned model), with MTP statistics.

Without ``--model`` it serves the library — the Hugging Face cache, the models folder, the
grafted copies and the demo — loading each model a request names in a worker of its own, within
``--max-loaded`` and the memory budget, and unloading idle ones after ``--idle-unload``
(docs/server-api.md#models). ``--model PATH`` pins one model, loaded before the server listens.
Loopback only unless ``--api-key`` (or ``MTP_STUDIO_API_KEY``) is given. Once the port is bound
(and a pinned model loaded) it prints one ``listening on URL`` line on stderr (the Server panel
and the tests wait for it), then one line per request and per model load or unload
(``--log-format json``: one JSON object per line). A worker killed by an illegal instruction (a
llama.cpp build this CPU cannot run) fails its request with 503 and stops the server with that
error and its advice (exit status 2): every later request would crash the same way.
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
    CLI_OPTION_NAMES,
    add_drafter_argument,
    add_load_arguments,
    depth_argument,
    describe_drafting,
    describe_images,
    describe_load,
)
from app.commands.serve_options import (
    add_library_arguments,
    idle_unload_seconds,
    memory_budget,
    model_folders,
)
from app.engine.chat.memory import physical_memory_bytes
from app.engine.errors import ServerError, UnrunnableBuildError
from app.engine.library.inventory import LibrarySources
from app.engine.load_options import LoadOptions, load_options_problem
from app.engine.runtime.backends.choice import BACKEND_CHOICES
from app.engine.runtime.chat_format.images import ImageLimits
from app.engine.runtime.core.backend import LoadSettings
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
from app.engine.server.core.model_directory import ModelDirectory
from app.engine.server.core.model_log import model_event_json, model_event_text
from app.engine.server.core.request_log import RequestLogEntry
from app.engine.server.models.catalogue import Catalogue, library_catalogue, pinned_catalogue
from app.engine.server.models.loading import LoadRules, RunnerFactory
from app.engine.server.models.names import parse_alias
from app.engine.server.models.pool import ModelPool, PoolEvent, PoolRules
from app.engine.server.models.runner import ModelRunner

API_KEY_VARIABLE = "MTP_STUDIO_API_KEY"
LISTENING = "listening on"
SHUTDOWN_GRACE_SECONDS = 5


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="serve a model over OpenAI- and Anthropic-compatible HTTP APIs",
        description=(
            "Serve every model on disk (or the one --model names) at /v1/chat/completions, "
            "/v1/completions, /v1/responses and /v1/models (OpenAI; also without /v1) and "
            "/v1/messages and "
            "/v1/messages/count_tokens (Anthropic), plus /health, Prometheus /metrics, "
            "/v1/status and POST /models/unload, with MTP speculative decoding. A request's "
            "'model' picks the model (its id or a unique short name), loaded on demand in a "
            "worker of its own; a name the server does not have is a 404. Requests for "
            "different models run at once; requests for one model run one at a time, the rest "
            "wait in its FIFO (their headers are sent while they wait). Every reply carries its "
            "MTP statistics in an 'mtp' object."
        ),
    )
    add_library_arguments(parser, BACKEND_CHOICES)
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
        help="requests that may wait for one model; more get 503 + Retry-After "
        f"(default {DEFAULT_QUEUE_SIZE})",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        metavar="N",
        help="reply length for a request that sets none (default: up to the context size)",
    )
    _add_limit_arguments(parser)
    add_load_arguments(parser)
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="request log on stderr: a short line, or one JSON object per line",
    )
    parser.set_defaults(func=run)


def _add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    """What a request's body and images may be, and which web pages and Host names may call."""
    parser.add_argument(
        "--max-body-mib",
        type=int,
        default=DEFAULT_MAX_BODY_MIB,
        metavar="MIB",
        help=f"larger request bodies get 413 (default {DEFAULT_MAX_BODY_MIB})",
    )
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
    config = ServerConfig(
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
    factory = RunnerFactory(_load_rules(args, config))
    sources = LibrarySources(model_folders(args))
    pinned = args.model is not None
    catalogue = pinned_catalogue(args.model, sources) if pinned else library_catalogue(sources)
    directory: ModelDirectory
    metrics = ServerMetrics(
        lambda: directory.waiting,
        lambda: directory.running,
        lambda: len(directory.pool.loaded_ids()),
    )
    unrunnable: list[UnrunnableBuildError] = []
    server: uvicorn.Server | None = None

    def stop_serving(error: UnrunnableBuildError) -> None:
        unrunnable.append(error)
        if server is not None:
            server.should_exit = True  # uvicorn's loop sees it within 0.1 s

    directory = _directory(args, config, catalogue, factory, metrics, stop_serving, sources)
    listener = _bind(config.host, config.port)
    try:
        runner = _preload(directory.pool, factory, catalogue) if pinned else None
        app = build_app(config, directory, metrics, _log_writer(args.log_format))
        directory.pool.start()
        port = listener.getsockname()[1]
        url = dataclasses.replace(config, port=port).url
        _announce(args, url, config, directory, runner)
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
        if not unrunnable:
            server.run(sockets=[listener])
    finally:
        directory.stop()
    if unrunnable:  # no server that crashes on every request: stop, say why and what to do
        raise unrunnable[0]
    return 0


def _directory(
    args: argparse.Namespace,
    config: ServerConfig,
    catalogue: Catalogue,
    factory: RunnerFactory,
    metrics: ServerMetrics,
    on_unrunnable: Callable[[UnrunnableBuildError], None],
    sources: LibrarySources,
) -> ModelDirectory:
    """The served models: the pool that loads them, one queue per model asked for."""
    aliases = [parse_alias(text) for text in args.alias]
    if args.model is None and any(alias.target is None for alias in aliases):
        raise ServerError(
            "--alias NAME names another name for the --model served: without --model, write "
            "--alias NAME=MODEL"
        )
    models_log = _model_log_writer(args.log_format)

    def on_model_event(event: PoolEvent) -> None:
        metrics.record_model_event(event)
        models_log(event)

    rules = PoolRules(args.max_loaded, memory_budget(), idle_unload_seconds(args))
    return ModelDirectory(
        catalogue,
        ModelPool(factory, rules, on_model_event),
        factory,
        config,
        scan=None if args.model is not None else lambda: library_catalogue(sources),
        aliases=aliases,
        on_finished=metrics.record_generation,
        on_unrunnable=on_unrunnable,
    )


def _load_rules(args: argparse.Namespace, config: ServerConfig) -> LoadRules:
    options = LoadOptions(
        context_length=args.ctx,
        kv_cache_type=args.kv_type,
        flash_attention=args.flash_attn,
        state_cache_mib=args.state_cache_mib,
        threads=args.threads,
    )
    problem = load_options_problem(options, CLI_OPTION_NAMES)
    if problem is not None:
        raise ServerError(problem)
    images_off = args.mmproj is not None and args.mmproj.lower() == "none"
    projector = Path(args.mmproj) if args.mmproj is not None and not images_off else None
    if projector is not None and args.model is None:
        raise ServerError(
            f"--mmproj {args.mmproj} names the projector of the one model --model serves; "
            "without --model each GGUF model reads images with the mmproj-*.gguf beside it "
            "(--mmproj none: text only)"
        )
    if args.drafter is not None and args.model is None:
        raise ServerError(
            f"--drafter {args.drafter} names the drafter of the one model --model serves; "
            "without --model each model drafts with the drafter the library pairs with it"
        )
    return LoadRules(
        options=options,
        max_draft_depth=max(deepest(config.mtp_depth), LoadSettings().max_draft_depth),
        memory_bytes=physical_memory_bytes(),
        backend=args.backend if args.model is not None else "auto",
        projector=projector,
        images=not images_off,
        drafter=args.drafter.expanduser() if args.drafter is not None else None,
        parallel=args.parallel,
    )


def _preload(pool: ModelPool, factory: RunnerFactory, catalogue: Catalogue) -> ModelRunner:
    """Load the pinned model before listening, as ``serve --model`` always has."""
    model = catalogue.models[0]
    plan = factory.plan(model)
    if plan.kv_note is not None:
        kv_type = factory.rules.options.kv_cache_type
        raise ServerError(f"--kv-type {kv_type} cannot be used: {plan.kv_note}; use --kv-type f16")
    runner = pool.acquire(model)
    assert runner is not None
    pool.release(model.id)
    return runner


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before any model loads so a taken port fails fast."""
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
    args: argparse.Namespace,
    url: str,
    config: ServerConfig,
    directory: ModelDirectory,
    runner: ModelRunner | None,
) -> None:
    key = "API key required" if config.api_key else "no API key"
    served = _served(directory, runner)
    if args.log_format == "json":
        event = {
            "event": "listening",
            "url": url,
            "anthropic_url": anthropic_base_url(url),
            "model": runner and directory.catalogue.models[0].id,
            "models": len(directory.catalogue.models),
            "example_model": directory.catalogue.ids[0] if directory.catalogue.models else None,
            "mtp_depth": config.mtp_depth,
        }
        if runner is not None:
            settings = runner.plan.settings
            event.update(
                context_length=runner.info.context_length,
                parallel=runner.info.sequences,
                kv_cache_type=settings.kv_cache_type,
                flash_attention=settings.flash_attention,
                state_cache_mib=settings.state_cache_mib,
                projector=str(runner.info.projector) if runner.info.projector else None,
            )
        print(json.dumps(event), file=sys.stderr)
    else:
        print(f"mtp-studio serve: {LISTENING} {url} · {served} · {key}", file=sys.stderr)
        print(
            f"mtp-studio serve: Anthropic clients and Claude Code: base URL "
            f"{anthropic_base_url(url)} (POST /v1/messages)",
            file=sys.stderr,
        )
        if runner is not None:
            print(f"mtp-studio serve: {describe_load(runner.plan, runner.info)}", file=sys.stderr)
            print(f"mtp-studio serve: {describe_images(runner.info)}", file=sys.stderr)
    sys.stderr.flush()


def _served(directory: ModelDirectory, runner: ModelRunner | None) -> str:
    """``model X · MTP depth …`` for a pinned model, ``library: N models …`` otherwise."""
    if runner is not None:
        model_id = directory.catalogue.models[0].id
        return f"model {model_id} · {_describe_depth(directory.config, runner)}"
    rules = directory.pool.rules
    count = len(directory.catalogue.models)
    idle = (
        f"unloaded after {rules.idle_unload_seconds:.0f} s idle"
        if rules.idle_unload_seconds
        else "kept loaded"
    )
    most = f"at most {rules.max_loaded} loaded" if rules.max_loaded else "loaded within memory"
    return f"library: {count} model{'s' if count != 1 else ''}, loaded on demand ({most}, {idle})"


def _describe_depth(config: ServerConfig, runner: ModelRunner) -> str:
    info = runner.info
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


def _model_log_writer(log_format: str) -> Callable[[PoolEvent], None]:
    def emit(event: PoolEvent) -> None:
        if log_format == "json":
            print(model_event_json(event), file=sys.stderr, flush=True)
        else:
            print(f"mtp-studio serve: {model_event_text(event)}", file=sys.stderr, flush=True)

    return emit
