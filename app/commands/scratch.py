"""``mtp-studio scratch clean``: empty the scratch folder a failed publish leaves behind.

Cleaning asks before deleting (``-y`` skips the question; without a terminal to ask on it refuses)
and never touches a dangerous folder; the checks live in :mod:`app.engine.scratch`. Commands that
write to scratch take the same ``--scratch`` option through :func:`add_scratch_option`.
"""

from __future__ import annotations

import argparse
import sys

from app.engine.errors import ScratchError
from app.engine.scratch import (
    SCRATCH_ENV,
    check_safe_to_clean,
    clean_scratch,
    resolve_scratch,
    scratch_usage,
)


def add_scratch_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scratch",
        metavar="DIR",
        help=f"scratch folder (default: ${SCRATCH_ENV}, else 'scratch' in the user cache folder)",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("scratch", help="manage the scratch folder")
    actions = parser.add_subparsers(dest="scratch_command", metavar="ACTION", required=True)
    clean = actions.add_parser(
        "clean",
        help="remove everything inside the scratch folder",
        description=(
            "Remove the scratch folder's contents (the folder itself stays). Refuses /, the home "
            "folder, the current folder and their parents."
        ),
    )
    add_scratch_option(clean)
    clean.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    clean.set_defaults(func=run_clean)


def run_clean(args: argparse.Namespace) -> int:
    folder = resolve_scratch(args.scratch)
    resolved = check_safe_to_clean(folder)
    if not resolved.is_dir() or not any(resolved.iterdir()):
        state = "is empty" if resolved.is_dir() else "does not exist"
        print(f"nothing to clean: {folder} {state}")
        return 0
    if not args.yes:
        usage = scratch_usage(resolved)
        if not sys.stdin.isatty():
            raise ScratchError(
                f"refusing to remove {usage.describe()} from {folder} without confirmation: "
                "there is no terminal to ask on; pass -y to confirm"
            )
        answer = input(f"remove {usage.describe()} from {folder}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing removed")
            return 1
    removed = clean_scratch(resolved)
    print(f"removed {removed.describe()} from {folder}")
    return 0
