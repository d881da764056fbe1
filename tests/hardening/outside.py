"""What a hostile input wrote outside the folder it was given: the check every refusal test makes.

A snapshot of every path under a sandbox (links not followed) before and after; anything new or
changed that is not under the allowed folder is a write outside it.
"""

from __future__ import annotations

import os
from pathlib import Path


def tree_state(sandbox: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``sandbox`` → (size, mtime in ns) for files and links (not followed);
    folders → (-1, 0), since a folder changes whenever something is added inside it."""
    state: dict[str, tuple[int, int]] = {}
    for root, dirs, files in os.walk(sandbox, followlinks=False):
        for name in dirs + files:
            path = os.path.join(root, name)
            info = os.lstat(path)
            is_folder = name in dirs and not os.path.islink(path)
            state[path] = (-1, 0) if is_folder else (info.st_size, info.st_mtime_ns)
    return state


def written_outside(
    before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]], allowed: Path
) -> list[str]:
    """Paths new or changed since ``before`` that are not inside ``allowed`` (the folders
    leading to ``allowed`` may be created: making the destination is not a write outside it)."""
    prefix = str(allowed) + os.sep
    leading = {str(allowed), *map(str, allowed.parents)}
    return sorted(
        path
        for path, stamp in after.items()
        if before.get(path) != stamp and path not in leading and not path.startswith(prefix)
    )
