"""The CLI loads only the module of the subcommand it runs, and its ``--help`` still lists every
subcommand with the summary that module gives it."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import build_parser, chosen_command
from app.commands import COMMANDS

ROOT = Path(__file__).resolve().parents[1]


def _summaries(parser: argparse.ArgumentParser) -> dict[str, str]:
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {choice.dest: choice.help for choice in subparsers._choices_actions}


def test_each_stand_in_summary_is_the_modules_own() -> None:
    assert _summaries(build_parser(None)) == COMMANDS


@pytest.mark.parametrize("command", ["catalog", "extract", "graft", "download", "chat"])
@pytest.mark.slow
def test_a_subcommand_imports_its_own_module_and_no_other(command: str) -> None:
    code = (
        "import sys; from app.cli import build_parser; "
        f"build_parser({command!r}); "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('app.commands.'))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    others = {f"app.commands.{name}" for name in COMMANDS if name != command}
    assert f"app.commands.{command}" in loaded
    assert not others & set(loaded), f"{command} also imported {others & set(loaded)}"


def test_help_imports_no_engine_area() -> None:
    code = (
        "import sys, contextlib, io; from app.cli import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()): "
        "main(['--help'])\n"
        "print(' '.join(m for m in sys.modules if m.startswith(('app.engine', 'numpy', "
        "'huggingface_hub', 'llama_cpp', 'PySide6'))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert set(loaded) <= {"app.engine", "app.engine.errors"}  # the error types main() catches


def test_the_chosen_command_is_the_first_word_that_names_one() -> None:
    assert chosen_command(["--help"]) == ""
    assert chosen_command(["chat", "--prompt", "extract"]) == "chat"
    assert chosen_command(["nonsense"]) == ""
    assert chosen_command([]) == ""
    for name in COMMANDS:
        importlib.import_module(f"app.commands.{name}")  # every module still imports


@pytest.mark.parametrize("command", COMMANDS)
def test_every_commands_help_prints(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser(command).parse_args([command, "--help"])
    assert exited.value.code == 0
    assert f"usage: mtp-studio {command}" in capsys.readouterr().out
