"""``mtp-studio get``: download a model and make it draft with MTP, in one step.

Picks the quantisation (``--quant``, else the largest that fits this machine), downloads exactly
its files, and where it has no MTP head grafts the separate ``mtp-*.gguf`` head file beside it, or
fetches the sidecar for its base model (the catalog's, else one published on the Hub) and grafts
it (GGUF; a split GGUF is joined first) or leaves it in the cache for chat to pair (MLX). A model
that drafts with a separate drafter model (Gemma 4) gets one quantisation of the drafter beside
it (from the same repo, the catalog's ``drafter_repo``, or a ``<base>-assistant`` repo).
Recorded in the job history like a download. Progress and what was done go to stderr; the last
line on stdout is the ready model's path.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.commands.catalog import add_catalog_option
from app.commands.progress import ProgressPrinter
from app.commands.recorded import run_recorded_command
from app.engine.catalog import load_catalog
from app.engine.chat.memory import physical_memory_bytes
from app.engine.hub.drafter_lookup import catalog_drafters
from app.engine.hub.get import GET_KIND, GetJob, GetResult, plan_get
from app.engine.hub.search import catalog_sidecars
from app.engine.settings import SettingsStore, app_dirs
from app.engine.store import JobSpec
from app.engine.terminal import printable
from app.engine.units import format_bytes


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "get",
        help="download one quantisation of a model and make it MTP-ready",
        description=(
            "Download one quantisation of a Hub repo and make it MTP-ready: a separate mtp-*.gguf "
            "head file is grafted into a copy; otherwise the sidecar for its base model (the "
            "catalog's, else one published on the Hub) is grafted (GGUF) or paired (MLX); a "
            "Gemma 4 model gets its separate drafter model beside it. The last line printed is "
            "the ready model's path."
        ),
    )
    parser.add_argument("repo", help="owner/name on the Hub (see mtp-studio search)")
    parser.add_argument(
        "--quant", default="", metavar="LABEL", help="e.g. Q4_K_M (default: the largest that fits)"
    )
    parser.add_argument(
        "--projector",
        default="",
        metavar="LABEL|NAME|none",
        help="the vision projector to fetch with a GGUF model that ships one (default: the "
        "smallest lossless, e.g. F16); none: no projector",
    )
    parser.add_argument(
        "--cache-dir", metavar="DIR", help="another Hugging Face cache folder (default: settings)"
    )
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    add_catalog_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings = SettingsStore().load()
    entries = load_catalog(args.catalog or None).entries()
    plan = plan_get(
        args.repo,
        args.quant,
        endpoint=settings.endpoint,
        token=None,
        sidecars=catalog_sidecars(entries),
        memory_bytes=physical_memory_bytes(),
        drafters=catalog_drafters(entries),
        projector=args.projector,
    )
    drafter = (
        f" from {plan.drafter_repo}: {', '.join(plan.drafter_files)}" if plan.drafter_repo else ""
    )
    print(
        printable(f"{plan.repo_id}: {plan.quant} ({plan.format}), MTP: {plan.way}{drafter}"),
        file=sys.stderr,
    )
    cache = Path(args.cache_dir or settings.models_path())
    job = GetJob(plan, settings.endpoint, cache, app_dirs().grafted_models)
    result = run_recorded_command(
        JobSpec(GET_KIND, plan.title, job.to_params()),
        job,
        ProgressPrinter(sys.stderr),
        "stopped with Ctrl-C; run it again to resume",
    )
    assert isinstance(result, GetResult)
    if args.json:
        print(json.dumps(result.summary()))
        return 0
    print(
        printable(f"done: {format_bytes(result.model.downloaded_bytes)} downloaded; {result.note}"),
        file=sys.stderr,
    )
    if result.drafter is not None and result.drafter_download is not None:
        fetched = format_bytes(result.drafter_download.downloaded_bytes)
        print(printable(f"drafter: {result.drafter} ({fetched} downloaded)"), file=sys.stderr)
    print(printable(result.ready_path))
    return 0
