"""The command line: every GUI feature is also a subcommand, so work runs headless too.

With no subcommand the desktop window opens. Errors the user can act on (:class:`MtpStudioError`)
are printed as one clear line and exit with status 2; anything else is a bug and keeps its
traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from app import __version__
from app.commands import COMMAND_MODULES
from app.engine.errors import JobCancelled, MtpStudioError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mtp-studio",
        description="Publish, download and run Multi-Token-Prediction (MTP) models.",
    )
    parser.add_argument("--version", action="version", version=f"mtp-studio {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(f"app.commands.{module_name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        return _launch_gui(parser)
    try:
        return int(args.func(args) or 0)
    except JobCancelled as exc:
        print(f"mtp-studio: {exc}", file=sys.stderr)
        return 130
    except MtpStudioError as exc:
        print(f"mtp-studio: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mtp-studio: interrupted", file=sys.stderr)
        return 130


def _launch_gui(parser: argparse.ArgumentParser) -> int:
    try:
        gui = importlib.import_module("app.ui.main")
    except ModuleNotFoundError:
        parser.print_help()
        return 0
    return int(gui.run())
