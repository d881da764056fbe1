"""Opening the app's SQLite files privately, and saying who holds one that stays locked.

The job and chat histories hold prompts, replies and job parameters, so they are created 0600
(SQLite gives its ``-wal`` and ``-shm`` files the database's mode) and an existing file readable
by others is narrowed to 0600 when opened. When another process keeps a database locked past
the busy timeout, SQLite only says "database is locked"; :func:`locked_message` finds which
process holds it (Linux: ``/proc/locks``, then open descriptors under ``/proc``) so the user
can close that program instead of being told to move the history away.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

BUSY_TIMEOUT_SECONDS = 10
PRIVATE_MODE = 0o600
_COMPANIONS = ("", "-wal", "-shm", "-journal")


def connect_private(path: Path) -> sqlite3.Connection:
    """A connection to ``path``, created 0600 if new and narrowed to 0600 if others can read it."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_MODE))
    except FileExistsError:
        narrow_to_private(path)
    return sqlite3.connect(path, check_same_thread=False, timeout=BUSY_TIMEOUT_SECONDS)


def narrow_to_private(path: Path) -> None:
    """Make ``path`` (and its SQLite companions) 0600 when group or others have any access."""
    for suffix in _COMPANIONS:
        companion = path.with_name(path.name + suffix)
        try:
            info = companion.lstat()
            if stat.S_ISREG(info.st_mode) and info.st_mode & 0o077 and info.st_uid == os.getuid():
                os.chmod(companion, PRIVATE_MODE)
        except (FileNotFoundError, AttributeError):  # AttributeError: os.getuid on Windows
            continue


def is_locked(exc: sqlite3.Error) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


def locked_message(path: Path, what: str) -> str:
    """One line for a database that stayed locked past the busy timeout."""
    holders = lock_holders(path)
    who = (
        "by " + ", ".join(f"process {pid} ({name})" for pid, name in holders)
        if holders
        else "by another process"
    )
    return (
        f"{path}: the {what} is locked {who} and stayed locked for {BUSY_TIMEOUT_SECONDS} s; "
        "close that program (or wait for it to finish) and try again — the file is not damaged"
    )


def lock_holders(path: Path) -> list[tuple[int, str]]:
    """``(pid, command name)`` of other processes that lock or open ``path`` (Linux only)."""
    if not Path("/proc/locks").exists():  # macOS, Windows: the message names no process
        return []
    inodes = set()
    for suffix in _COMPANIONS:
        try:
            info = path.with_name(path.name + suffix).stat()
        except OSError:
            continue
        inodes.add((os.major(info.st_dev), os.minor(info.st_dev), info.st_ino))
    pids = _pids_locking(inodes) or _pids_opening(path)
    pids.discard(os.getpid())
    return [(pid, _command_name(pid)) for pid in sorted(pids)]


def _pids_locking(inodes: set[tuple[int, int, int]]) -> set[int]:
    pids: set[int] = set()
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return pids
    for line in lines:
        fields = line.split()
        if len(fields) < 6 or fields[1] in ("->",):
            continue
        try:
            major, minor, inode = fields[5].split(":")
            key = (int(major, 16), int(minor, 16), int(inode))
            if key in inodes:
                pids.add(int(fields[4]))
        except ValueError:
            continue
    return pids


def _pids_opening(path: Path) -> set[int]:
    targets = {str(path.resolve()) + suffix for suffix in _COMPANIONS}
    pids: set[int] = set()
    try:
        entries = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return pids
    for entry in entries:
        try:
            for fd in os.listdir(f"/proc/{entry}/fd"):
                if os.readlink(f"/proc/{entry}/fd/{fd}") in targets:
                    pids.add(int(entry))
                    break
        except OSError:
            continue
    return pids


def _command_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() or "unknown"
    except OSError:
        return "unknown"
