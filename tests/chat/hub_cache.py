"""Placing files in a Hugging Face cache exactly as huggingface_hub lays them out."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

SHA = "0123456789abcdef0123456789abcdef01234567"


def put_in_cache(cache: Path, repo_id: str, name: str, source: Path) -> Path:
    """Copy ``source`` into ``cache`` as a blob of ``repo_id`` and link it from a snapshot."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    blob = repo / "blobs" / f"blob-{name}"
    blob.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, blob)
    link = repo / "snapshots" / SHA / name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(SHA)
    return link
