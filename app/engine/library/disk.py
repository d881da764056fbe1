"""How many bytes a model really takes on disk, and which files make it up.

Two layouts, two ways of counting:

- In a Hugging Face cache a snapshot holds symlinks into ``blobs/``, and several revisions (or
  files) may link the same blob. The model's files are found with huggingface_hub's own
  ``scan_cache_dir`` — in every cached revision of its repo — and each blob is counted once.
  That is also what deleting the model frees (see :mod:`app.engine.library.deletion`).
- Anywhere else a model is a GGUF (all its split parts) or a folder; its regular files are
  counted once per inode, symlinks are not followed (a link leading out of the folder is not
  the model's space).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import CachedFileInfo, CachedRepoInfo, HFCacheInfo, scan_cache_dir
from huggingface_hub.errors import CacheNotFound

from app.engine.chat.model_files import GGUF, ModelDescription, split_parts

WEIGHT_SUFFIXES = (".gguf", ".safetensors")


@dataclass(frozen=True)
class SnapshotSelection:
    """The files of one model inside a cached repo's snapshots: the named files (a GGUF and its
    split parts), or everything under ``folder`` (``""``: the whole snapshot)."""

    files: frozenset[str] = frozenset()
    folder: str | None = None

    def matches(self, relative: str) -> bool:
        if relative in self.files:
            return True
        if self.folder is None:
            return False
        return self.folder == "" or relative.startswith(f"{self.folder}/")


def selection_for(description: ModelDescription, snapshot: Path) -> SnapshotSelection:
    """Which files of a snapshot belong to the model at ``description.path`` inside it."""
    if description.kind == GGUF:
        parts = split_parts(description.path)
        return SnapshotSelection(files=frozenset(_relative(part, snapshot) for part in parts))
    folder = _relative(description.path, snapshot)
    return SnapshotSelection(folder="" if folder == "." else folder)


def _relative(path: Path, snapshot: Path) -> str:
    return path.relative_to(snapshot).as_posix()


class CacheScan:
    """One ``scan_cache_dir`` per Hugging Face cache, looked up by repo folder."""

    def __init__(self, caches: Iterable[Path]) -> None:
        self._repos: dict[Path, tuple[HFCacheInfo, CachedRepoInfo]] = {}
        for cache in caches:
            info = scan(cache)
            if info is None:
                continue
            for repo in info.repos:
                self._repos[Path(repo.repo_path)] = (info, repo)

    def repo(self, repo_folder: Path) -> tuple[HFCacheInfo, CachedRepoInfo] | None:
        """The scan and the cached repo stored in ``repo_folder`` (None when not scanned)."""
        return self._repos.get(repo_folder)


def scan(cache: Path) -> HFCacheInfo | None:
    """huggingface_hub's scan of ``cache`` (None when it holds no ``models--*`` folder)."""
    if not cache.is_dir() or not any(cache.glob("models--*")):
        return None
    with contextlib.suppress(CacheNotFound):
        return scan_cache_dir(cache)
    return None


def selected_files(repo: CachedRepoInfo, selection: SnapshotSelection) -> list[CachedFileInfo]:
    """The model's files in every cached revision of ``repo``."""
    found = []
    for revision in repo.revisions:
        for file in revision.files:
            relative = Path(file.file_path).relative_to(revision.snapshot_path).as_posix()
            if selection.matches(relative):
                found.append(file)
    return found


def blob_bytes(files: Iterable[CachedFileInfo]) -> int:
    """Bytes of the blobs behind ``files``, each blob once however many links point at it."""
    sizes = {Path(file.blob_path): file.size_on_disk for file in files}
    return sum(sizes.values())


def model_targets(description: ModelDescription) -> tuple[Path, ...]:
    """What makes up a model outside a cache: every part of a GGUF, or the model folder."""
    if description.kind == GGUF:
        return tuple(split_parts(description.path))
    return (description.path,)


def plain_bytes(paths: Iterable[Path]) -> int:
    """Bytes of the regular files at or under ``paths``, each inode once, links not followed."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for path in paths:
        for file in _regular_files(path):
            try:
                stat = file.lstat()
            except OSError:
                continue
            if (stat.st_dev, stat.st_ino) not in seen:
                seen.add((stat.st_dev, stat.st_ino))
                total += stat.st_size
    return total


def _regular_files(path: Path) -> Iterable[Path]:
    if path.is_symlink():
        return
    if path.is_file():
        yield path
        return
    for folder, _dirs, names in os.walk(path):  # os.walk does not follow folder symlinks
        for name in names:
            file = Path(folder) / name
            if not file.is_symlink() and file.is_file():
                yield file
