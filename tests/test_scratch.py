"""The scratch folder: where it is, what the sidecar is called, and a clean that cannot go wrong."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import platformdirs
import pytest

from app.cli import main
from app.engine.scratch import SCRATCH_ENV, resolve_scratch, sidecar_output_path

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _isolated_places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test here may see the real scratch folder or settings of the machine."""
    monkeypatch.delenv(SCRATCH_ENV, raising=False)
    monkeypatch.setenv("MTP_STUDIO_HOME", str(tmp_path / "app-home"))


def _fill(folder: Path) -> None:
    (folder / "nested" / "deeper").mkdir(parents=True)
    (folder / "acme--qwen3-6b-mtp-mtp.safetensors").write_bytes(b"x" * 1000)
    (folder / "nested" / "part.tmp").write_bytes(b"y" * 400)
    (folder / "nested" / "deeper" / "log.txt").write_bytes(b"z" * 100)


def test_explicit_folder_wins_over_environment(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(SCRATCH_ENV, str(tmp_path / "from-env"))
    assert resolve_scratch(tmp_path / "given") == tmp_path / "given"
    assert resolve_scratch() == tmp_path / "from-env"


def test_default_is_scratch_in_the_user_cache_folder(monkeypatch) -> None:
    monkeypatch.delenv("MTP_STUDIO_HOME")
    expected = Path(platformdirs.user_cache_dir("mtp-studio", appauthor=False)) / "scratch"
    assert resolve_scratch() == expected.absolute()


def test_resolving_creates_nothing(tmp_path: Path) -> None:
    resolve_scratch(tmp_path / "not-yet")
    assert not (tmp_path / "not-yet").exists()


def test_sidecar_output_path_turns_the_repo_id_into_a_file_name(tmp_path: Path) -> None:
    path = sidecar_output_path(tmp_path, "acme/qwen3-6b-mtp")
    assert path == tmp_path / "acme--qwen3-6b-mtp-mtp.safetensors"


def test_clean_removes_contents_keeps_folder_and_reports(tmp_path: Path, capsys) -> None:
    scratch = tmp_path / "scratch"
    _fill(scratch)
    assert main(["scratch", "clean", "--scratch", str(scratch), "-y"]) == 0
    assert capsys.readouterr().out == f"removed 3 files (1.5 kB) from {scratch}\n"
    assert scratch.is_dir() and list(scratch.iterdir()) == []


def test_clean_uses_the_environment_folder(tmp_path: Path, capsys, monkeypatch) -> None:
    scratch = tmp_path / "env-scratch"
    _fill(scratch)
    monkeypatch.setenv(SCRATCH_ENV, str(scratch))
    assert main(["scratch", "clean", "-y"]) == 0
    assert f"from {scratch}" in capsys.readouterr().out
    assert list(scratch.iterdir()) == []


def test_clean_removes_symlinks_but_never_what_they_point_to(tmp_path: Path, capsys) -> None:
    keep = tmp_path / "precious"
    keep.mkdir()
    (keep / "model.safetensors").write_bytes(b"w" * 10)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "link-to-folder").symlink_to(keep)
    (scratch / "link-to-file").symlink_to(keep / "model.safetensors")
    assert main(["scratch", "clean", "--scratch", str(scratch), "-y"]) == 0
    assert list(scratch.iterdir()) == []
    assert (keep / "model.safetensors").read_bytes() == b"w" * 10


@pytest.mark.parametrize("state", ["missing", "empty"])
def test_nothing_to_clean(tmp_path: Path, capsys, state: str) -> None:
    scratch = tmp_path / "scratch"
    if state == "empty":
        scratch.mkdir()
    assert main(["scratch", "clean", "--scratch", str(scratch)]) == 0
    expected = "is empty" if state == "empty" else "does not exist"
    assert capsys.readouterr().out == f"nothing to clean: {scratch} {expected}\n"


def test_without_terminal_and_without_yes_nothing_is_removed(tmp_path: Path, capsys) -> None:
    scratch = tmp_path / "scratch"
    _fill(scratch)
    assert main(["scratch", "clean", "--scratch", str(scratch)]) == 2
    err = capsys.readouterr().err
    assert f"refusing to remove 3 files (1.5 kB) from {scratch} without confirmation" in err
    assert "pass -y to confirm" in err
    assert (scratch / "acme--qwen3-6b-mtp-mtp.safetensors").exists()


def _refused(argv_folder: Path | str, capsys) -> str:
    assert main(["scratch", "clean", "--scratch", str(argv_folder), "-y"]) == 2
    return capsys.readouterr().err


def test_refuses_the_filesystem_root(capsys) -> None:
    assert "it is the root of the filesystem" in _refused("/", capsys)


def test_refuses_home_and_its_parents(tmp_path: Path, monkeypatch, capsys) -> None:
    home = tmp_path / "users" / "ada"
    home.mkdir(parents=True)
    (home / "notes.txt").write_text("mine")
    monkeypatch.setenv("HOME", str(home))
    assert "it is your home folder" in _refused("~", capsys)
    assert "it is your home folder" in _refused(home, capsys)
    assert "it contains your home folder" in _refused(tmp_path / "users", capsys)
    assert (home / "notes.txt").read_text() == "mine"


def test_refuses_the_current_folder_and_its_parents(tmp_path: Path, monkeypatch, capsys) -> None:
    work = tmp_path / "projects" / "work"
    work.mkdir(parents=True)
    (work / "code.py").write_text("print()")
    monkeypatch.chdir(work)
    assert "it is the current folder" in _refused(".", capsys)
    assert "it contains the current folder" in _refused("..", capsys)
    assert "it contains the current folder" in _refused(tmp_path, capsys)
    assert (work / "code.py").exists()


def test_refuses_a_symlink_that_leads_to_home(tmp_path: Path, monkeypatch, capsys) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    link = tmp_path / "innocent-scratch"
    link.symlink_to(home)
    err = _refused(link, capsys)
    assert f"refusing to clean {link} (= {home}): it is your home folder" in err


def test_refuses_a_file(tmp_path: Path, capsys) -> None:
    file = tmp_path / "scratch"
    file.write_text("not a folder")
    assert "it is a file, not a folder" in _refused(file, capsys)
    assert file.read_text() == "not a folder"


@pytest.mark.parametrize(("answer", "code", "removed"), [("y", 0, True), ("n", 1, False)])
def test_asks_on_a_terminal(tmp_path: Path, answer: str, code: int, removed: bool) -> None:
    scratch = tmp_path / "scratch"
    _fill(scratch)
    output, status = _run_on_terminal(
        ["scratch", "clean", "--scratch", str(scratch)], answer, env_home=tmp_path / "app-home"
    )
    assert f"remove 3 files (1.5 kB) from {scratch}? [y/N]" in output
    assert status == code
    assert (list(scratch.iterdir()) == []) is removed
    assert ("removed 3 files" in output) is removed


def _run_on_terminal(argv: list[str], answer: str, env_home: Path) -> tuple[str, int]:
    """Run the CLI in a real pseudo-terminal and type ``answer`` at its prompt."""
    controller, terminal = pty.openpty()
    env = {**os.environ, "MTP_STUDIO_HOME": str(env_home)}
    process = subprocess.Popen(
        [sys.executable, "-m", "app", *argv],
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        cwd=REPO_ROOT,
        env=env,
    )
    os.close(terminal)
    output = _read_until(controller, b"[y/N]")
    assert b"[y/N]" in output, output.decode()
    os.write(controller, answer.encode() + b"\n")
    status = process.wait(timeout=60)
    output += _read_until(controller, None)
    os.close(controller)
    return output.decode(), status


def _read_until(controller: int, marker: bytes | None) -> bytes:
    """Read the terminal until ``marker`` shows up or the program closes it."""
    output = b""
    while marker is None or marker not in output:
        try:
            chunk = os.read(controller, 1024)
        except OSError:  # Linux reports a closed pseudo-terminal as EIO
            break
        if not chunk:
            break
        output += chunk
    return output
