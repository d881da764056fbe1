"""``mtp-studio ls``: the models on disk that ``serve`` can run — name, format, size, MTP.

The same list ``serve`` answers ``/v1/models`` with and the Models page shows (the library's
inventory: the demo, the Hugging Face cache, the models folder, grafted copies), each under the
id a request sends. MTP says how it drafts: ``head`` (inside the file), ``sidecar`` or
``drafter`` (paired beside it), or ``none``. Models found but unable to run here are listed
after, with the reason. ``--json`` prints one object (docs/cli.md#ls-and-ps).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from app.commands.serve_options import model_folders
from app.engine.library.inventory import LibrarySources
from app.engine.server.models.catalogue import (
    MTP_NONE,
    Catalogue,
    ServableModel,
    library_catalogue,
)
from app.engine.units import format_bytes

HEADINGS = ("ID", "FORMAT", "SIZE", "MTP")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ls",
        help="list the models on disk that serve can run, with their MTP status",
        description=(
            "List the models serve runs without --model: the Hugging Face cache, the models "
            "folder and grafted copies, each with the id a request sends, its format, size on "
            "disk and how it drafts (MTP: head, sidecar, drafter or none)."
        ),
    )
    parser.add_argument(
        "--models-dir",
        type=Path,
        metavar="DIR",
        help="the models folder to list besides the Hugging Face cache (default: Settings')",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    roots = model_folders(args)
    catalogue = library_catalogue(LibrarySources(roots))
    if args.json:
        print(json.dumps(_as_json(catalogue, roots.model_roots), indent=2))
        return 0
    rows = [HEADINGS, *(_row(model) for model in catalogue.models)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADINGS) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        print("  ".join([*cells, row[-1]]).rstrip())
    for model_id, why in catalogue.unservable:
        print(f"cannot run here: {model_id}: {why}")
    total = sum(model.size_bytes for model in catalogue.models)
    count = len(catalogue.models)
    folders = ", ".join(str(root) for root in roots.model_roots)
    print(f"{count} model{'s' if count != 1 else ''} · {format_bytes(total)} · looked in {folders}")
    return 0


def _row(model: ServableModel) -> tuple[str, str, str, str]:
    form = f"{model.format} {model.quantisation}".strip()
    return (model.id, form, format_bytes(model.size_bytes), _mtp(model))


def _mtp(model: ServableModel) -> str:
    if model.mtp == MTP_NONE:
        return MTP_NONE
    return f"{model.mtp} ({model.mtp_detail})" if model.mtp_detail else model.mtp


def _as_json(catalogue: Catalogue, roots: tuple[Path, ...]) -> dict[str, Any]:
    return {
        "models": [
            {
                "id": model.id,
                "names": list(model.names),
                "path": str(model.path),
                "format": model.format,
                "quantization": model.quantisation,
                "size_bytes": model.size_bytes,
                "architecture": model.architecture,
                "mtp": model.mtp,
                "mtp_detail": model.mtp_detail or None,
                "mtp_note": model.mtp_note,
                "projector": str(model.projector) if model.projector else None,
            }
            for model in catalogue.models
        ],
        "unservable": [{"id": model_id, "why": why} for model_id, why in catalogue.unservable],
        "roots": [str(root) for root in roots],
    }
