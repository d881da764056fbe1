"""``mtp-studio publish``: publish a catalog entry's artifacts (today: its MTP sidecar).

The command only builds a :class:`~app.engine.publish_plan.PublishPlan` from the catalog entry and
hands it on: ``--dry-run`` prints the plan without touching the network; otherwise
:func:`execute` runs it.
"""

from __future__ import annotations

import argparse

from app.commands.catalog import add_catalog_option
from app.commands.scratch import add_scratch_option
from app.engine.catalog import load_catalog
from app.engine.errors import PublishError
from app.engine.publish_plan import (
    ALL_ARTIFACTS,
    ArtifactKind,
    PublishPlan,
    artifact_kinds,
    plan_publish,
)
from app.engine.scratch import resolve_scratch


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
    """Run ``plan`` against the Hub (issue 3 replaces this with the app.engine.hub publish job)."""
    raise PublishError(
        f"publishing {plan.entry.key} to the Hub is not available in this version yet; "
        "run with --dry-run to see what would be published"
    )
