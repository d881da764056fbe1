"""Issue 23: a graft's temporary file is created exclusively; a killed graft's leftover is swept.

The old writer opened ``.<out>.<pid>.graft-partial`` without ``O_EXCL``: a symlink planted at that
predictable name made the graft overwrite the link's target. A graft killed by SIGKILL left its
temporary file for ever. Both are checked here with the real graft of the demo model.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from app.engine.graft import graft_mtp
from app.engine.jobs import JobContext, JobEvent, LogEvent
from app.engine.mtp import LocalFolderSource, extract_mtp
from tests.graft.bases import DEMO_HF


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _logged(events: list[JobEvent]) -> str:
    return "\n".join(event.message for event in events if isinstance(event, LogEvent))


def test_a_link_planted_at_the_old_temporary_name_is_not_followed(
    graft_files: dict[str, Path], tmp_path: Path
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "grafted.gguf"
    (tmp_path / f".{out.name}.{os.getpid()}.graft-partial").symlink_to(victim)
    graft_mtp(graft_files["trunk_q8"], graft_files["sidecar_fp8"], out)
    assert victim.read_text() == "precious"
    assert out.stat().st_size > 1_000_000 and out.read_bytes()[:4] == b"GGUF"


def test_the_leftover_of_a_killed_graft_is_removed_and_logged(
    graft_files: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "grafted.gguf"
    dead = tmp_path / f".{out.name}.{_dead_pid()}.k3j9x_2a.graft-partial"
    dead.write_bytes(bytes(4096))
    running = tmp_path / f".other.gguf.{os.getppid()}.q8w1e2r3.graft-partial"
    running.write_bytes(bytes(10))
    events: list[JobEvent] = []
    graft_mtp(
        graft_files["trunk_q8"], graft_files["sidecar_fp8"], out, ctx=JobContext(events.append)
    )
    assert not dead.exists()
    assert f"removed {dead.name} (4096 bytes)" in _logged(events)
    assert running.exists(), "a graft still running elsewhere keeps its temporary file"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith("graft-partial")] == [
        running.name
    ]


def test_the_leftover_of_a_killed_extraction_is_removed_and_logged(tmp_path: Path) -> None:
    out = tmp_path / "mtp.safetensors"
    dead = tmp_path / f".{out.name}.{_dead_pid()}.abcdefgh.partial"
    dead.write_bytes(bytes(100))
    events: list[JobEvent] = []
    extract_mtp(LocalFolderSource(DEMO_HF), out, ctx=JobContext(events.append))
    assert not dead.exists() and out.is_file()
    assert f"removed {dead.name} (100 bytes)" in _logged(events)
    assert oct(out.stat().st_mode & 0o777) == oct(0o644)
