"""Replacing a published file or folder only once its new version is complete.

The artifacts under resources/models/ are what the app and its tests load. A build that dies
half-way must leave the previous, good artifacts in place, so everything is written under a
temporary name next to its destination and renamed into place at the end.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def staging_path(destination: Path) -> Path:
    """A fresh temporary sibling of ``destination`` (any leftover from a failed run is removed)."""
    staging = destination.with_name(f".{destination.name}.partial")
    if staging.is_dir():
        shutil.rmtree(staging)
    elif staging.exists():
        staging.unlink()
    return staging


def publish(staging: Path, destination: Path) -> None:
    """Move a completed ``staging`` file or folder to ``destination``, replacing the old one."""
    if staging.is_dir():
        retired = destination.with_name(f".{destination.name}.old")
        if retired.exists():
            shutil.rmtree(retired)
        if destination.exists():
            destination.rename(retired)
        staging.rename(destination)
        if retired.exists():
            shutil.rmtree(retired)
    else:
        os.replace(staging, destination)
