"""The command line: every GUI feature is also a subcommand, so work runs headless too.

With no subcommand the desktop window opens. Errors the user can act on (:class:`MtpStudioError`)
are printed as one clear line and exit with status 2; anything else is a bug and keeps its
traceback. SIGTERM stops a command the way Ctrl-C does, so a graft or an extraction removes its
temporary file on the way out (exit status 143) instead of leaving it behind.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from app import __version__
from app.commands import COMMANDS
from app.engine.errors import JobCancelled, MtpStudioError


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser, with ``command``'s module loaded in full (``None``: every module).

    The other subcommands get a stand-in that carries only their summary for ``--help``; no
    module is imported for them, so a command pays for its own imports only.
    """
    parser = argparse.ArgumentParser(
        prog="mtp-studio",
        description="Publish, download and run Multi-Token-Prediction (MTP) models.",
    )
    parser.add_argument("--version", action="version", version=f"mtp-studio {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, summary in COMMANDS.items():
        if command is None or name == command:
            importlib.import_module(f"app.commands.{name}").register(subparsers)
        else:
            subparsers.add_parser(name, help=summary)
    return parser


def chosen_command(argv: Sequence[str]) -> str:
    """The subcommand named on the command line ("" for none: the window, --help, --version)."""
    first = next((arg for arg in argv if not arg.startswith("-")), "")
    return first if first in COMMANDS else ""


LOADS_MODELS_HERE = frozenset({"serve", "bench"})
"""Commands that open llama.cpp in their own process (the server's prompt counter, in-process
benchmarks), not only in workers: llama.cpp must load before numpy there (see load_order)."""


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = chosen_command(argv)
    if command in LOADS_MODELS_HERE:
        from app.engine.runtime.backends.llama_cpp.load_order import load_llama_cpp_first

        load_llama_cpp_first()
    parser = build_parser(command)
    args = parser.parse_args(argv)
    if args.command is None:
        return _launch_gui(parser)
    try:
        with _sigterm_unwinds():
            return int(args.func(args) or 0)
    except JobCancelled as exc:
        print(f"mtp-studio: {_shown(exc)}", file=sys.stderr)
        return 130
    except MtpStudioError as exc:
        print(f"mtp-studio: error: {_shown(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mtp-studio: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print("mtp-studio: terminated", file=sys.stderr)
        return 143


def _shown(exc: BaseException) -> str:
    """The message with credentials masked and control characters (from names a Hub or server
    sent) made inert; imported here: ``--help`` loads no engine area."""
    from app.engine.credentials import mask_credentials
    from app.engine.terminal import printable

    return printable(mask_credentials(str(exc)), multiline=True)


class Terminated(BaseException):
    """SIGTERM arrived: unwinds like Ctrl-C, so ``finally`` blocks and clean-ups run."""


def _terminated(_signum: int, _frame: object) -> None:
    raise Terminated


@contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """While the command runs, SIGTERM raises :class:`Terminated` (main thread only; the
    previous handler is put back, so an in-process caller keeps its own)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _launch_gui(parser: argparse.ArgumentParser) -> int:
    try:
        gui = importlib.import_module("app.ui.main")
    except ModuleNotFoundError:
        parser.print_help()
        return 0
    return int(gui.run())
