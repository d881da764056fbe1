"""Free disk space check, done before a download starts rather than failing at 97%."""

from __future__ import annotations

import shutil
from pathlib import Path

from app.engine.errors import DownloadError
from app.engine.units import format_bytes


def existing_ancestor(path: Path) -> Path:
    """The nearest folder of ``path`` that exists (the destination may not exist yet)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(path.anchor or ".")


def check_free_space(destination: Path, needed: int) -> int:
    """Raise :class:`DownloadError` unless ``needed`` bytes fit; return the free bytes."""
    free = shutil.disk_usage(existing_ancestor(destination)).free
    if needed > free:
        raise DownloadError(
            f"not enough free disk space in {destination}: the download needs "
            f"{format_bytes(needed)} more, {format_bytes(free)} is free; free some space or "
            "choose another destination"
        )
    return free
