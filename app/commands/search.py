"""``mtp-studio search``: find conversions of a model on the Hub, with what each needs for MTP.

Prints one block per repo — format, downloads, MTP readiness — and one line per quantisation:
the label to pass to ``download --quant`` / ``get --quant``, its size (all parts of a split file),
whether it fits this machine's memory, and how it gets its MTP head. ``--json`` prints one JSON
object instead. The last line says how many repos were found and how long the search took.
"""

from __future__ import annotations

import argparse
import json

from app.commands.catalog import add_catalog_option
from app.engine.catalog import load_catalog
from app.engine.chat.memory import physical_memory_bytes
from app.engine.hub.drafter_lookup import catalog_drafters
from app.engine.hub.search import (
    DEFAULT_LIMIT,
    FORMATS,
    SIDECAR,
    SORTS,
    RepoHit,
    SearchQuery,
    SearchResult,
    catalog_sidecars,
    search_models,
)
from app.engine.settings import SettingsStore
from app.engine.terminal import printable
from app.engine.units import format_bytes


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "search",
        help="search the Hub for a model's GGUF / MLX conversions and their quantisations",
        description=(
            "Search the Hub (the endpoint in Settings) for model repos; list each repo's "
            "quantisations with sizes, whether they fit this machine's memory, and whether they "
            "can draft with MTP (head inside, separate head file, a separate drafter model, a "
            "catalog sidecar, or none)."
        ),
    )
    parser.add_argument("text", nargs="?", default="", help="part of the repo id, e.g. Qwen3.6")
    parser.add_argument("--format", choices=FORMATS, default="", help="only repos of this format")
    parser.add_argument("--sort", choices=sorted(SORTS), default="downloads", help="order")
    parser.add_argument(
        "--base", default="", metavar="ORG/NAME", help="only conversions of this base model"
    )
    parser.add_argument(
        "--limit", type=int, default=DEFAULT_LIMIT, help=f"repos (default {DEFAULT_LIMIT})"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_catalog_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    query = SearchQuery(args.text, args.format, args.base, args.sort, args.limit)
    settings = SettingsStore().load()
    entries = load_catalog(args.catalog or None).entries()
    result = search_models(
        query,
        endpoint=settings.endpoint,
        token=None,
        sidecars=catalog_sidecars(entries),
        memory_bytes=physical_memory_bytes(),
        drafters=catalog_drafters(entries),
    )
    if args.json:
        print(json.dumps(result_json(result)))
    else:
        print(result_text(result))
    return 0


def result_json(result: SearchResult) -> dict[str, object]:
    return {"hits": [hit.to_json() for hit in result.hits], "seconds": round(result.seconds, 3)}


def result_text(result: SearchResult) -> str:
    lines: list[str] = []
    for hit in result.hits:
        lines += hit_lines(hit)
    lines.append(f"{len(result.hits)} repo(s) in {result.seconds:.2f} s")
    return "\n".join(printable(line) for line in lines)


def hit_lines(hit: RepoHit) -> list[str]:
    via = f" ({hit.sidecar_repo})" if hit.mtp == SIDECAR and hit.sidecar_repo else ""
    lines = [f"{hit.repo_id}  [{hit.format}]  {hit.downloads:,} downloads  MTP: {hit.mtp}{via}"]
    for option in hit.quantisations:
        parts = f" in {len(option.files)} parts" if option.files and len(option.files) > 1 else ""
        context = f" at {option.fit.context:,} tokens" if option.fit.context else ", file only"
        fit = f"{option.fit.mark} {option.fit.verdict} (~{format_bytes(option.fit.estimate_bytes)}"
        lines.append(
            f"  {option.label:<14} {format_bytes(option.size):>10}{parts}  {fit}{context})  "
            f"MTP: {option.mtp}"
        )
    if hit.drafter is not None:
        drafter_sizes = ", ".join(
            f"{q.label} {format_bytes(q.size)}" for q in hit.drafter.quantisations
        )
        lines.append(f"  {hit.drafter.describe()}: {drafter_sizes}")
    if hit.projectors:
        lines.append(
            f"  vision projector: {', '.join(hit.projectors)} (get fetches {hit.projector}; "
            "choose with --projector)"
        )
    return lines
