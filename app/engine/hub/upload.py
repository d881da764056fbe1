"""One commit with the sidecar and its model card, with byte-level upload progress.

Why this way: no ``huggingface_hub`` upload function takes a progress callback, but every byte
of an LFS upload is read from the file object given to ``CommitOperationAdd`` (a file object also
keeps the upload on the LFS path, which reports per byte, rather than Xet). So the sidecar goes
in as a :class:`CountingReader` whose reads move the progress, and the SHA-256 the writer
computed while writing is preset on the operation, so the client never reads the file an extra
time to hash it: every read is a byte sent. A retried part or PUT seeks back, and the progress
goes back with it — it always shows bytes actually on their way.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import Path

from huggingface_hub import CommitInfo, CommitOperationAdd, HfApi

from app.engine.errors import PublishError
from app.engine.safepath import relative_path_problem


class CountingReader(io.BufferedIOBase):
    """A read-only, seekable view of a file that reports its position after every read."""

    def __init__(self, path: Path, on_position: Callable[[int], None]) -> None:
        super().__init__()
        self._file = open(path, "rb", buffering=0)  # noqa: SIM115 (closed by close())
        self._on_position = on_position
        self.bytes_read = 0
        """Every byte handed out, re-reads of retried requests included."""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        data = self._file.read() if size is None or size < 0 else self._file.read(size)
        self.bytes_read += len(data)
        self._on_position(self._file.tell())
        return data

    def read1(self, size: int = -1) -> bytes:
        return self.read(size)

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell()

    def close(self) -> None:
        self._file.close()
        super().close()


def commit_sidecar(
    api: HfApi,
    repo_id: str,
    sidecar: Path,
    sha256_hex: str,
    readme: str,
    *,
    filename: str,
    message: str,
    description: str,
    on_position: Callable[[int], None],
) -> tuple[CommitInfo, int]:
    """Commit ``sidecar`` (as ``filename``) and ``README.md``; returns the commit and bytes read.

    The operation is built from the path (the client reads only a 512-byte sample for the
    preupload call), then given the known digest and the counting reader. ``filename`` must be
    a safe relative path in the repo (checked before anything is sent).
    """
    if (problem := relative_path_problem(filename)) is not None:
        raise PublishError(
            f"sidecar file name {filename!r} in {repo_id} is refused: {problem}; use a plain "
            "relative name such as mtp.safetensors"
        )
    sidecar_op = CommitOperationAdd(path_in_repo=filename, path_or_fileobj=str(sidecar))
    sidecar_op.upload_info.sha256 = bytes.fromhex(sha256_hex)
    reader = CountingReader(sidecar, on_position)
    sidecar_op.path_or_fileobj = reader
    card_op = CommitOperationAdd(path_in_repo="README.md", path_or_fileobj=readme.encode())
    try:
        info = api.create_commit(
            repo_id,
            [sidecar_op, card_op],
            commit_message=message,
            commit_description=description,
        )
    finally:
        reader.close()
    return info, reader.bytes_read
