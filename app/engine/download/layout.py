"""Where a downloaded file lives while incomplete, once complete, and how it becomes visible.

Two layouts:
- :class:`CacheLayout`: the Hugging Face cache (``models--owner--name/blobs/<etag>``,
  ``snapshots/<commit>/<path>`` as relative links, ``refs/<revision>``), so ``transformers``,
  ``hf_hub_download(local_files_only=True)`` and ``hf cache`` see the files. The partial file is
  ``blobs/<etag>.incomplete`` and the lock ``.locks/<repo folder>/<etag>.lock`` — the same names
  huggingface_hub uses, so the two never write one blob at once.
- :class:`FolderLayout`: plain files under a folder, partials under ``.cache/mtp-studio/``.

Names and ids reach a layout already checked by the plan; :meth:`Layout.entry_problem` adds the
check only the disk can answer (does the final path, symlinks followed, stay inside its folder),
and :meth:`Layout.publish` repeats it at the moment of writing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from huggingface_hub.file_download import are_symlinks_supported, repo_folder_name

from app.engine.download.plan import RemoteFile
from app.engine.errors import DownloadError
from app.engine.safepath import escape_problem


class Layout(Protocol):
    root: Path

    def final_path(self, file: RemoteFile) -> Path: ...

    def entry_problem(self, file: RemoteFile) -> str | None: ...

    def partial_path(self, file: RemoteFile) -> Path: ...

    def lock_path(self, file: RemoteFile) -> Path: ...

    def is_complete(self, file: RemoteFile) -> bool: ...

    def blob_ready(self, file: RemoteFile) -> bool: ...

    def publish(self, file: RemoteFile, partial: Path) -> Path: ...

    def finish(self) -> Path: ...


def _final_problem(folder: Path, final: Path) -> str | None:
    """Why ``final`` would land outside ``folder``: its parent, symlinks followed, must be inside.

    The final name itself may be a link (a snapshot entry is one): it is replaced, never written
    through, so only the folders on the way are resolved.
    """
    return escape_problem(folder, final.parent)


def _checked_final(folder: Path, final: Path, file: RemoteFile) -> Path:
    """``final`` if it stays inside ``folder`` (symlinks followed), else a DownloadError."""
    problem = _final_problem(folder, final)
    if problem is not None:
        raise DownloadError(
            f"{file.path!r} is refused: {problem}; remove that link from {folder} and run the "
            "download again"
        )
    return final


def _replace(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(source, target)


class CacheLayout:
    """The Hugging Face cache layout under ``cache_dir`` for one pinned commit."""

    def __init__(self, cache_dir: Path, repo_id: str, revision: str, commit: str) -> None:
        self.cache_dir = cache_dir
        folder = repo_folder_name(repo_id=repo_id, repo_type="model")
        self.root = cache_dir / folder
        self._locks = cache_dir / ".locks" / folder
        self._revision = revision
        self._commit = commit

    def _blob(self, file: RemoteFile) -> Path:
        return self.root / "blobs" / file.blob_name

    def final_path(self, file: RemoteFile) -> Path:
        return self.root / "snapshots" / self._commit / file.path

    def entry_problem(self, file: RemoteFile) -> str | None:
        return _final_problem(self.root / "snapshots" / self._commit, self.final_path(file))

    def partial_path(self, file: RemoteFile) -> Path:
        return self.root / "blobs" / f"{file.blob_name}.incomplete"

    def lock_path(self, file: RemoteFile) -> Path:
        return self._locks / f"{file.blob_name}.lock"

    def is_complete(self, file: RemoteFile) -> bool:
        """True when the snapshot entry resolves to a blob of the right size."""
        final = self.final_path(file)
        return final.exists() and final.stat().st_size == file.size

    def blob_ready(self, file: RemoteFile) -> bool:
        """The content is already in the cache (e.g. from another revision): only link it."""
        blob = self._blob(file)
        return blob.exists() and blob.stat().st_size == file.size

    def publish(self, file: RemoteFile, partial: Path) -> Path:
        """Give the verified partial its blob name, then link the snapshot entry to it."""
        final = _checked_final(self.root / "snapshots" / self._commit, self.final_path(file), file)
        blob = self._blob(file)
        if partial.exists():
            _replace(partial, blob)
        final.parent.mkdir(parents=True, exist_ok=True)
        if are_symlinks_supported(self.cache_dir):
            link = final.with_name(f".{final.name}.link")
            link.unlink(missing_ok=True)
            os.symlink(os.path.relpath(blob, final.parent), link)
            os.replace(link, final)
        else:
            # What huggingface_hub does without symlinks (Windows without developer mode).
            _replace(blob, final)
        return final

    def finish(self) -> Path:
        """Record which commit the revision pointed to; return the snapshot folder."""
        if self._revision != self._commit:
            ref = self.root / "refs" / self._revision
            ref.parent.mkdir(parents=True, exist_ok=True)
            temporary = ref.with_name(f".{ref.name}.tmp")
            temporary.write_text(self._commit)
            os.replace(temporary, ref)
        snapshot = self.root / "snapshots" / self._commit
        snapshot.mkdir(parents=True, exist_ok=True)
        return snapshot


class FolderLayout:
    """Plain files under ``folder``; partials named by content id (a changed file restarts)."""

    def __init__(self, folder: Path) -> None:
        self.root = folder
        self._work = folder / ".cache" / "mtp-studio"

    def final_path(self, file: RemoteFile) -> Path:
        return self.root / file.path

    def entry_problem(self, file: RemoteFile) -> str | None:
        return _final_problem(self.root, self.final_path(file))

    def partial_path(self, file: RemoteFile) -> Path:
        return self._work / f"{file.blob_name}.incomplete"

    def lock_path(self, file: RemoteFile) -> Path:
        return self._work / f"{file.blob_name}.lock"

    def is_complete(self, file: RemoteFile) -> bool:
        final = self.final_path(file)
        return final.is_file() and final.stat().st_size == file.size

    def blob_ready(self, file: RemoteFile) -> bool:
        return False

    def publish(self, file: RemoteFile, partial: Path) -> Path:
        final = _checked_final(self.root, self.final_path(file), file)
        _replace(partial, final)
        return final

    def finish(self) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        return self.root
