"""``mtp-studio download``: the download wizard's engine, headless.

Same job as the GUI's (resumable, verified, into the Hugging Face cache by default) and recorded
in the same job history, so a download started here shows up in the app's monitor, and one that
was interrupted resumes from the byte reached when run again.
"""

from __future__ import annotations

import argparse
import sys

from app.commands.progress import ProgressPrinter
from app.commands.recorded import run_recorded_command
from app.engine.download import CACHE, FOLDER, DownloadJob, DownloadRequest
from app.engine.settings import SettingsStore
from app.engine.store import JobSpec
from app.engine.terminal import printable
from app.engine.units import format_bytes


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "download",
        help="download a repo (or some of its files), resumable and verified",
        description=(
            "Download files of a Hub repo into the Hugging Face cache (default, shared with other "
            "tools) or a plain folder. Interrupted downloads resume from the byte reached."
        ),
    )
    parser.add_argument("repo", help="owner/name on the Hub")
    parser.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="PATTERN",
        help="glob of files to fetch, e.g. 'mtp.safetensors' or '*.json' (repeatable; default all)",
    )
    parser.add_argument(
        "--quant",
        default="",
        metavar="LABEL",
        help=(
            "one GGUF quantisation, e.g. Q4_K_M: all parts of a split file plus a separate "
            "mtp-*.gguf head file and one vision projector, nothing else (see mtp-studio search)"
        ),
    )
    parser.add_argument(
        "--projector",
        default="",
        metavar="LABEL|NAME|none",
        help="with --quant: the vision projector to fetch (default: the smallest lossless one, "
        "e.g. F16); none: no projector",
    )
    parser.add_argument(
        "--dest", metavar="DIR", help="a plain folder to put the files in (default: the HF cache)"
    )
    parser.add_argument(
        "--cache-dir", metavar="DIR", help="another Hugging Face cache folder (default: settings)"
    )
    parser.add_argument("--revision", default="main", help="branch, tag or commit (default main)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings = SettingsStore().load()
    if args.dest:
        destination, layout = args.dest, FOLDER
    else:
        destination, layout = str(args.cache_dir or settings.models_path()), CACHE
    request = DownloadRequest(
        repo_id=args.repo,
        destination=destination,
        endpoint=settings.endpoint,
        revision=args.revision,
        include=tuple(args.include),
        layout=layout,
        quant=args.quant,
        projector=args.projector,
    )
    printer = ProgressPrinter(sys.stderr)
    run_recorded_command(
        JobSpec("download", request.title, request.to_params()),
        DownloadJob(request),
        printer,
        "stopped with Ctrl-C; run it again to resume",
    )
    summary = printer.result
    print(
        f"done: {summary.get('files')} file(s), "
        f"{format_bytes(summary.get('downloaded_bytes', 0))} downloaded",
        file=sys.stderr,
    )
    print(printable(summary.get("location", "")))
    return 0
