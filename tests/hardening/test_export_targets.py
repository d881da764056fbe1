"""Issue 23: an export replaces nothing without confirmation, and never anything but a file.

As root the old export replaced ``/dev/null`` with a Markdown file; a link at the chosen name was
replaced by a file; a 300-character name was a raw ``OSError``. Each case runs the real export
against a real target of that kind and checks both the error and that the target is unchanged.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.engine.chat.export import ExportError, export_conversation
from tests.hardening.test_hostile_names import small_conversation


def test_an_existing_file_is_kept_without_confirmation(tmp_path: Path) -> None:
    target = tmp_path / "chat.md"
    target.write_text("an older export")
    with pytest.raises(ExportError, match=r"chat.md already exists .*confirm replacing it"):
        export_conversation(small_conversation(tmp_path), target)
    assert target.read_text() == "an older export"


def test_a_confirmed_export_replaces_the_file(tmp_path: Path) -> None:
    target = tmp_path / "chat.md"
    target.write_text("an older export")
    export_conversation(small_conversation(tmp_path), target, replace=True)
    assert target.read_text().startswith("# ")


def test_a_link_is_never_replaced_even_when_confirmed(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    link = tmp_path / "chat.md"
    link.symlink_to(victim)
    with pytest.raises(ExportError, match=r"chat.md is a link, not a regular file"):
        export_conversation(small_conversation(tmp_path), link, replace=True)
    assert link.is_symlink() and victim.read_text() == "untouched"


def test_a_pipe_is_never_replaced_even_when_confirmed(tmp_path: Path) -> None:
    pipe = tmp_path / "chat.md"
    os.mkfifo(pipe)
    with pytest.raises(ExportError, match=r"is a device, pipe or socket, not a regular file"):
        export_conversation(small_conversation(tmp_path), pipe, replace=True)
    assert not pipe.is_file() and pipe.exists()


def test_dev_null_is_never_replaced(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match=r"/dev/null is a device"):
        export_conversation(small_conversation(tmp_path), Path("/dev/null"), replace=True)
    assert Path("/dev/null").is_char_device()


def test_a_300_character_name_is_a_clear_error(tmp_path: Path) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    with pytest.raises(ExportError, match=r"file name of 303 characters .*choose a shorter name"):
        export_conversation(small_conversation(tmp_path), folder / ("c" * 300 + ".md"))
    assert list(folder.iterdir()) == []


def test_a_name_just_under_the_limit_is_written(tmp_path: Path) -> None:
    target = tmp_path / ("c" * 252 + ".md")
    assert export_conversation(small_conversation(tmp_path), target).is_file()
