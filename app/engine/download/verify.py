"""Checks a finished partial file against the Hub's ids before it takes its final name.

LFS files are checked by SHA-256, regular files by their git blob id (``sha1("blob <size>\\0" +
content)``) — both come from the tree listing of the pinned commit, so a corrupted or stale
partial is caught whichever kind of file it is.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from app.engine.download.plan import RemoteFile
from app.engine.errors import DownloadError

_BLOCK = 4 << 20


def content_id(path: Path, file: RemoteFile, on_bytes: Callable[[int], None]) -> str:
    """The id of ``path`` computed the way ``file`` is identified (sha256 or git blob id)."""
    git_header = b"blob %d\0" % path.stat().st_size
    digest = hashlib.sha256() if file.sha256 else hashlib.sha1(git_header)
    with path.open("rb") as source:
        while block := source.read(_BLOCK):
            digest.update(block)
            on_bytes(len(block))
    return digest.hexdigest()


def verify_partial(partial: Path, file: RemoteFile, on_bytes: Callable[[int], None]) -> None:
    """Raise :class:`DownloadError` (and delete the bad partial) unless size and id match."""
    actual_size = partial.stat().st_size
    if actual_size != file.size:
        partial.unlink()
        raise DownloadError(
            f"{file.path}: downloaded {actual_size} bytes, the Hub lists {file.size}; the partial "
            "file was removed — run the download again"
        )
    expected = file.sha256 or file.git_oid
    actual = content_id(partial, file, on_bytes)
    if actual != expected:
        partial.unlink()
        kind = "sha256" if file.sha256 else "git blob id"
        raise DownloadError(
            f"{file.path}: {kind} {actual} does not match the Hub's {expected}; the corrupted "
            "file was removed — run the download again"
        )
