"""``mtp-studio publish``: publish a catalog entry's artifacts (today: its MTP sidecar).

The command only builds a :class:`~app.engine.publish_plan.PublishPlan` from the catalog entry and
hands it on: ``--dry-run`` prints the plan without touching the network; otherwise
:func:`execute` runs it.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from app.commands.catalog import add_catalog_option
from app.commands.recorded import run_recorded_command
from app.commands.scratch import add_scratch_option
from app.engine.catalog import load_catalog
from app.engine.hub import PUBLISHED, PublishOptions, publish_sidecar
from app.engine.hub.job import publish_job_spec
from app.engine.jobs import JobEvent, LogEvent, ProgressEvent, ResultEvent, StageEvent
from app.engine.publish_plan import (
    ALL_ARTIFACTS,
    ArtifactKind,
    PublishPlan,
    artifact_kinds,
    plan_publish,
)
from app.engine.scratch import resolve_scratch
from app.engine.settings import SettingsStore
from app.engine.units import format_bytes


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "publish",
        help="publish a catalog entry's MTP sidecar to the Hub",
        description=(
            "Extract the MTP heads of the entry's mtp_source_repo in BF16 and publish them as "
            "mtp.safetensors in its mtp_sidecar_repo."
        ),
    )
    parser.add_argument("--model", required=True, metavar="KEY", help="catalog entry key")
    parser.add_argument(
        "--artifact",
        choices=[*ArtifactKind, ALL_ARTIFACTS],
        default=ALL_ARTIFACTS,
        help="what to publish: mtp (the sidecar) or all (every kind; today only mtp)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the plan; touch neither network nor disk"
    )
    parser.add_argument(
        "--force", action="store_true", help="publish again even if already published"
    )
    add_catalog_option(parser)
    add_scratch_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    entry = load_catalog(args.catalog).entry(args.model)
    plan = plan_publish(entry, artifact_kinds(args.artifact), resolve_scratch(args.scratch))
    if args.dry_run:
        for line in plan.describe():
            print(line)
        return 0
    return execute(plan, force=args.force)


def execute(plan: PublishPlan, *, force: bool) -> int:
    """Run ``plan``: the publish job of app.engine.hub, recorded in the job history."""
    sidecar = plan.mtp
    if sidecar is None:
        return 0
    settings = SettingsStore().load()
    options = PublishOptions(
        force=force, endpoint=settings.endpoint, file_in_collection=settings.file_in_collection
    )
    run_recorded_command(
        publish_job_spec(sidecar, options),
        lambda ctx: publish_sidecar(sidecar, options, ctx),
        PublishPrinter(sys.stdout, sys.stderr),
        "stopped with Ctrl-C; run it again (a sidecar already extracted is reused)",
    )
    return 0


STAGE_WORDS = {
    "preflight": "checking the token and write access for",
    "pin": "pinning",
    "detect": "finding the MTP heads of",
    "extract": "extracting to",
    "card": "writing the model card of",
    "upload": "uploading",
    "collection": "filing into",
    "clean": "cleaning up scratch",
}
PROGRESS_WORDS = {"extract": "fetching", "upload": "uploading"}


class PublishPrinter:
    """Prints publish events as ``mtp: …`` lines, e.g. ``mtp: uploading 12% (1.3 GB / 10.6 GB)``.

    Progress lines come at most every 1% or every second (the job's ProgressReporter throttles);
    warnings go to ``errors``.
    """

    def __init__(self, out: TextIO, errors: TextIO) -> None:
        self._out = out
        self._errors = errors

    def __call__(self, event: JobEvent) -> None:
        if isinstance(event, StageEvent):
            words = STAGE_WORDS.get(event.stage, event.stage)
            self._line(f"mtp: {words} {event.detail}".rstrip())
        elif isinstance(event, ProgressEvent) and event.total:
            percent = int(100 * event.done / event.total)
            words = PROGRESS_WORDS.get(event.stage, event.stage)
            self._line(
                f"mtp: {words} {percent}% "
                f"({format_bytes(event.done)} / {format_bytes(event.total)})"
            )
        elif isinstance(event, LogEvent):
            if event.level == "warning":
                self._line(f"mtp: warning: {event.message}", self._errors)
            else:
                self._line(f"mtp: {event.message}")
        elif isinstance(event, ResultEvent) and event.summary.get("outcome") == PUBLISHED:
            summary = event.summary
            self._line(
                f"mtp: published hf://{summary['sidecar_repo']}/{summary['filename']} "
                f"({format_bytes(summary['sidecar_bytes'])}, {summary['tensor_count']} tensors, "
                f"fetched {format_bytes(summary['bytes_fetched'])} of "
                f"{summary['source_repo']}) in {summary['seconds_total']:.1f} s"
            )

    def _line(self, text: str, stream: TextIO | None = None) -> None:
        target = stream or self._out
        target.write(text + "\n")
        target.flush()
