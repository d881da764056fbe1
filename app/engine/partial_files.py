"""Temporary files written beside an output, created exclusively, and the leftovers of killed runs.

A graft or an extraction writes its output under a temporary name in the output's folder and
renames it into place when complete. The name used to be predictable and opened without
``O_EXCL``, so a symlink planted there made the write land on the link's target; and a run
killed by SIGKILL (or a power cut) left its temporary file behind for ever.

:func:`create_partial` makes the file with :func:`tempfile.mkstemp` (``O_EXCL``, a random name,
never following a link) and puts the writer's process id in the name, so :func:`sweep_partials`
can tell, on the next run, which leftovers belong to a process that no longer exists, remove
them and say so. Files of a process still running are left alone.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

OUTPUT_MODE = 0o644
"""The mode a finished output gets (mkstemp creates 0600)."""


@dataclass(frozen=True)
class Leftover:
    """A temporary file removed because the process that wrote it is gone."""

    path: Path
    size: int
    pid: int

    def describe(self) -> str:
        return (
            f"removed {self.path.name} ({self.size} bytes), left in {self.path.parent} by an "
            f"interrupted run (process {self.pid})"
        )


def create_partial(out: Path, suffix: str) -> tuple[int, Path]:
    """An open descriptor and the path of a new, empty temporary file beside ``out``."""
    fd, name = tempfile.mkstemp(
        prefix=f".{out.name}.{os.getpid()}.", suffix=f".{suffix}", dir=out.parent
    )
    if hasattr(os, "fchmod"):  # not on Windows, where mkstemp's file is not private anyway
        os.fchmod(fd, OUTPUT_MODE)
    return fd, Path(name)


def sweep_partials(folder: Path, suffix: str) -> list[Leftover]:
    """Remove ``folder``'s temporary files with ``suffix`` whose writing process is gone."""
    pattern = re.compile(rf"^\..+\.(\d+)\.[^.]+\.{re.escape(suffix)}$")
    removed: list[Leftover] = []
    try:
        candidates = list(folder.iterdir())
    except OSError:
        return removed
    for path in candidates:
        match = pattern.match(path.name)
        if match is None or _alive(int(match.group(1))):
            continue
        try:
            info = path.lstat()
            if not stat.S_ISREG(info.st_mode):
                continue
            path.unlink()
        except OSError:
            continue
        removed.append(Leftover(path, info.st_size, int(match.group(1))))
    return removed


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs; on Windows always assumed (signal 0 there is CTRL_C_EVENT)."""
    if pid == os.getpid() or os.name == "nt":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True
