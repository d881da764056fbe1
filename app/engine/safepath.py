"""Checks for names that come from a file or a server before they become local paths.

A Hub endpoint is whatever the user configures (an enterprise or local hub may be hostile or
broken), and a checkpoint's index or a catalog is just a file someone wrote. Joining such a name
onto a folder without looking at it lets ``../x``, ``/etc/x`` or ``C:\\x`` write (or read) outside
that folder. Every such name goes through this one module, so the rules are the same everywhere:

* a relative POSIX path: not empty, no ``..`` / ``.`` / empty segment, not absolute, no drive
  letter (in any segment), no backslash, no NUL or other control character, no segment longer
  than :data:`MAX_NAME_BYTES` (the file system's 255 less room for a temporary name's suffix);
* once joined and resolved (symlinks followed), still inside the folder it was joined onto;
* a content id is lowercase hex of exactly the expected length.

The functions return the reason a name is refused (or ``None``), or raise the caller's area
error, so each area keeps its own exception type and its own advice on how to fix things.
"""

from __future__ import annotations

import re
from pathlib import Path

from app.engine.errors import MtpStudioError

_DRIVE = re.compile(r"^[A-Za-z]:")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_HEX = re.compile(r"[0-9a-f]+")

MAX_NAME_BYTES = 200
"""A file or folder name's length in UTF-8 bytes: file systems allow 255, and a download writes
``.NAME.link``-style temporary names beside the file."""
GIT_OID_LENGTH = 40
SHA256_LENGTH = 64


def relative_path_problem(name: object, max_name_bytes: int | None = MAX_NAME_BYTES) -> str | None:
    """Why ``name`` is not a safe relative POSIX path, or ``None`` when it is one
    (``max_name_bytes`` None: names of any length, for a caller that checks them itself)."""
    if not isinstance(name, str):
        return f"it is a {type(name).__name__}, not a string"
    if not name:
        return "it is empty"
    if _CONTROL.search(name):
        return "it contains a control character (NUL, newline, …)"
    if "\\" in name:
        return "it contains a backslash"
    if name.startswith("/"):
        return "it is an absolute path"
    segments = name.split("/")
    if any(_DRIVE.match(segment) for segment in segments):
        return "it has a drive letter (C:…), which Windows reads as another disk"
    if ".." in segments:
        return "it has a '..' segment that climbs out of its folder"
    if any(segment in ("", ".") for segment in segments):
        return "it has an empty or '.' segment"
    longest = max(len(segment.encode("utf-8", "surrogatepass")) for segment in segments)
    if max_name_bytes is not None and longest > max_name_bytes:
        return (
            f"it has a name of {longest} bytes; names over {max_name_bytes} bytes are refused "
            "(file systems allow 255, and a download needs room for a temporary name beside it)"
        )
    return None


def plain_name_problem(name: object, max_name_bytes: int | None = MAX_NAME_BYTES) -> str | None:
    """Why ``name`` is not a single safe file or folder name (no ``/`` at all), or ``None``."""
    problem = relative_path_problem(name, max_name_bytes)
    if problem is None and "/" in str(name):
        return "it contains '/'"
    return problem


def hex_id_problem(value: object, length: int) -> str | None:
    """Why ``value`` is not lowercase hex of ``length`` digits, or ``None`` when it is."""
    if not isinstance(value, str):
        return f"it is a {type(value).__name__}, not a string"
    if len(value) != length or not _HEX.fullmatch(value):
        return f"it is not {length} lowercase hex digits"
    return None


def escape_problem(root: Path, candidate: Path) -> str | None:
    """Why ``candidate`` leaves ``root`` once both are resolved (symlinks followed), or ``None``."""
    resolved_root = root.expanduser().resolve()
    resolved = candidate.expanduser().resolve()
    if resolved == resolved_root or resolved.is_relative_to(resolved_root):
        return None
    return f"it resolves to {resolved}, outside {resolved_root} (a symlink or '..' leads out)"


def contained_path_problem(root: Path, name: object) -> str | None:
    """Why ``root / name`` is unsafe (a bad name, or it resolves outside ``root``), or ``None``."""
    problem = relative_path_problem(name)
    if problem is not None:
        return problem
    assert isinstance(name, str)
    return escape_problem(root, root / name)


def safe_join(
    root: Path, name: object, error: type[MtpStudioError], what: str, advice: str
) -> Path:
    """``root / name`` after every check above; otherwise raise ``error``.

    The message reads ``<what> <name!r> is refused: <reason>; <advice>``, so it names the
    offending entry (``repr`` shows control characters) and says what to do.
    """
    problem = contained_path_problem(root, name)
    if problem is not None:
        raise error(f"{what} {name!r} is refused: {problem}; {advice}")
    assert isinstance(name, str)
    return root / name
