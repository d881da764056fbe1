"""``mtp-studio ps``: what a running server has loaded — models, slots, memory, clients.

It reads the server's ``GET /v1/status`` (docs/server-api.md#status-and-unloading): each loaded
model with its state, slots in use, requests waiting, estimated and resident memory and when it
will be unloaded for idleness, then the requests being served or waiting. ``--json`` prints the
status object as the server sent it. The key comes from ``--api-key`` or
``MTP_STUDIO_API_KEY``; names the server sends are printed without control characters.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from app.engine.remote.serve_admin import fetch_status
from app.engine.server.core.echo import clean
from app.engine.units import format_bytes

DEFAULT_URL = "http://127.0.0.1:8080"
API_KEY_VARIABLE = "MTP_STUDIO_API_KEY"
NAME_CHARACTERS = 80
HEADINGS = ("MODEL", "STATE", "SLOTS", "WAITING", "MEMORY (EST / RES)", "IDLE", "UNLOAD IN")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ps",
        help="show what a running server has loaded",
        description=(
            "Show the models a running mtp-studio serve has loaded (state, slots in use, "
            "requests waiting, memory, idle unload) and the requests it is serving."
        ),
    )
    parser.add_argument(
        "--url", default=DEFAULT_URL, help=f"the server (default {DEFAULT_URL}; /v1 optional)"
    )
    parser.add_argument(
        "--api-key", metavar="KEY", help=f"the server's key (or set {API_KEY_VARIABLE})"
    )
    parser.add_argument("--json", action="store_true", help="print the server's status object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    status = fetch_status(args.url, args.api_key or os.environ.get(API_KEY_VARIABLE))
    if args.json:
        print(json.dumps(status, indent=2))
        return 0
    for line in describe(status, args.url):
        print(line)
    return 0


def describe(status: dict[str, Any], url: str) -> list[str]:
    memory = status.get("memory", {})
    loaded = status["loaded"]
    lines = [
        f"{clean(url, NAME_CHARACTERS)} · {status.get('mode')} · {len(loaded)} loaded of "
        f"{status.get('models_available')} · memory ≈ "
        f"{format_bytes(memory.get('estimated_bytes') or 0)} estimated, "
        f"{format_bytes(memory.get('resident_bytes') or 0)} resident"
    ]
    rows = [HEADINGS, *(_model_row(model) for model in loaded)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADINGS))]
    lines += [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    clients = status.get("clients") or []
    if clients:
        lines.append("CLIENTS")
        lines += [_client_line(client) for client in clients]
    return lines


def _model_row(model: dict[str, Any]) -> tuple[str, ...]:
    slots = model.get("slots", {})
    memory = model.get("memory", {})
    resident = memory.get("resident_bytes")
    unload_in = model.get("unload_in_seconds")
    return (
        clean(str(model.get("id")), NAME_CHARACTERS),
        clean(str(model.get("state")), 20),
        f"{slots.get('busy', 0)}/{slots.get('total', 0)}",
        str(model.get("waiting", 0)),
        f"{format_bytes(memory.get('estimated_bytes') or 0)} / "
        f"{format_bytes(resident) if resident is not None else '?'}",
        f"{model.get('idle_seconds', 0):.0f} s",
        f"{unload_in:.0f} s" if isinstance(unload_in, int | float) else "—",
    )


def _client_line(client: dict[str, Any]) -> str:
    kind = "stream" if client.get("stream") else "whole"
    line = (
        f"  {clean(str(client.get('id')), 16)}  {clean(str(client.get('model')), NAME_CHARACTERS)}"
        f"  {clean(str(client.get('state')), 12)}  {clean(str(client.get('endpoint')), 30)} "
        f"({kind})  {clean(str(client.get('client')), 60)}  {client.get('seconds', 0):.1f} s"
    )
    if client.get("state") == "running":
        line += (
            f"  {client.get('generated_tokens', 0)} tokens"
            f"  {client.get('tokens_per_second', 0):.1f} tok/s"
        )
    return line
