"""A real LocalFolderSource that also records every read, to check what extraction fetches."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from app.engine.mtp import LocalFolderSource


@dataclass(frozen=True)
class Read:
    kind: str  # "read_bytes" | "iter_bytes"
    path: str
    start: int
    length: int


class RecordingSource(LocalFolderSource):
    """Reads the folder for real; ``reads`` lists each call in order with its byte range."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self.reads: list[Read] = []

    def read_bytes(self, path: str, start: int = 0, length: int | None = None) -> bytes:
        data = super().read_bytes(path, start, length)
        self.reads.append(Read("read_bytes", path, start, len(data)))
        return data

    def iter_bytes(self, path: str, start: int, length: int, chunk_size: int) -> Iterator[bytes]:
        self.reads.append(Read("iter_bytes", path, start, length))
        return super().iter_bytes(path, start, length, chunk_size)
