"""Writing a safetensors file as a stream, hashed on the way, visible only once complete.

The header is written first with offsets computed from the declared tensors, then the data is
appended piece by piece in declaration order, so no tensor is ever held whole in memory. The
file's SHA-256 (the Hub's LFS object id) is computed while writing, which saves a second pass over
gigabytes before upload. Hashing and writing run on two background threads (both release the
GIL) so they overlap with each other and with dequantisation. The file is written under a hidden
temporary name in the destination folder and renamed over the destination only when every byte
is in; on any failure the temporary file is removed, so a good file is never replaced by a
partial one.

Ctrl-C and SIGTERM unwind a CLI command by raising in the main thread (app/cli.py), which may
happen inside ``Queue.put``'s lock handling and leave the queue's lock inconsistent (seen: a
background thread then waited for ever for an item already given, and the aborted command with
it). So aborting never goes through the queues: it sets a stop flag that both threads look at
every :data:`_POLL_SECONDS`, and waits for them only :data:`_ABORT_WAIT_SECONDS` (they are daemon
threads, so a thread stuck on a broken lock does not keep the process alive).
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from app.engine.errors import ExtractError
from app.engine.mtp.header import expected_nbytes
from app.engine.partial_files import create_partial

_QUEUE_DEPTH = 8
EXTRACT_PARTIAL = "partial"
"""The suffix of a sidecar being written (``.mtp.safetensors.<pid>.<random>.partial``)."""
_DONE = None
_POLL_SECONDS = 0.1
_ABORT_WAIT_SECONDS = 5.0


@dataclass(frozen=True)
class OutputTensor:
    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return expected_nbytes(self.dtype, self.shape)


@dataclass(frozen=True)
class WrittenFile:
    path: Path
    sha256: str
    size: int


def safetensors_header(tensors: Sequence[OutputTensor], metadata: Mapping[str, str]) -> bytes:
    """The 8-byte length plus JSON header (space-padded to a multiple of 8) for ``tensors``.

    Data offsets follow the order of ``tensors``.
    """
    entries: dict[str, Any] = {"__metadata__": dict(metadata)}
    offset = 0
    for tensor in tensors:
        entries[tensor.name] = {
            "dtype": tensor.dtype,
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + tensor.nbytes],
        }
        offset += tensor.nbytes
    text = json.dumps(entries, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text


class SafetensorsStreamWriter:
    """Use as a context manager: ``write`` the data in order, then ``commit``.

    Leaving the ``with`` block without a successful ``commit`` removes the temporary file.
    """

    def __init__(
        self, path: Path, tensors: Sequence[OutputTensor], metadata: Mapping[str, str]
    ) -> None:
        self.path = Path(path)
        header = safetensors_header(tensors, metadata)
        self._expected_size = len(header) + sum(t.nbytes for t in tensors)
        self._fd, self._temp = create_partial(self.path, EXTRACT_PARTIAL)
        self._hash = hashlib.sha256()
        self._size = 0
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=_QUEUE_DEPTH)
        self._hashed: queue.Queue[Any] = queue.Queue(maxsize=_QUEUE_DEPTH)
        self._hasher = threading.Thread(target=self._hash_all, name="safetensors-hash", daemon=True)
        self._thread = threading.Thread(target=self._drain, name="safetensors-writer", daemon=True)
        self._hasher.start()
        self._thread.start()
        self.write(header)

    def write(self, data: Any) -> None:
        """Append ``data`` (bytes, memoryview or a C-contiguous numpy array)."""
        if self._error is not None:
            raise self._error
        self._queue.put(data)

    def commit(self) -> WrittenFile:
        """Wait for every byte, then move the file into place and return its size and hash."""
        self._finish_thread()
        if self._error is not None:
            raise self._error
        if self._size != self._expected_size:
            raise RuntimeError(
                f"{self.path}: wrote {self._size} bytes but the header declares "
                f"{self._expected_size}; refusing to publish a malformed file"
            )
        os.close(self._fd)
        self._fd = -1
        os.replace(self._temp, self.path)
        return WrittenFile(self.path, self._hash.hexdigest(), self._size)

    def abort(self) -> None:
        self._stop.set()
        deadline = time.monotonic() + _ABORT_WAIT_SECONDS  # for both threads together
        for thread in (self._hasher, self._thread):
            thread.join(max(0.0, deadline - time.monotonic()))
        if self._fd >= 0 and not self._thread.is_alive():  # a stuck writer keeps its descriptor
            os.close(self._fd)
        self._fd = -1
        self._temp.unlink(missing_ok=True)

    def __enter__(self) -> SafetensorsStreamWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._fd >= 0:
            self.abort()

    def _finish_thread(self) -> None:
        if self._thread.is_alive():
            self._queue.put(_DONE)
            self._hasher.join()
            self._thread.join()

    def _next(self, source: queue.Queue[Any]) -> Any:
        """The next item of ``source``, or :data:`_DONE` once an abort has been asked for."""
        while not self._stop.is_set():
            try:
                return source.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                continue
        return _DONE

    def _give(self, target: queue.Queue[Any], item: Any) -> None:
        """Put ``item`` in ``target`` unless an abort is asked for while it waits for room."""
        while not self._stop.is_set():
            try:
                target.put(item, timeout=_POLL_SECONDS)
                return
            except queue.Full:
                continue

    def _hash_all(self) -> None:
        """First stage: hash each buffer, then pass it on to be written."""
        while (data := self._next(self._queue)) is not _DONE:
            if self._error is not None:
                continue
            try:
                view = memoryview(data).cast("B")
                self._hash.update(view)
                self._give(self._hashed, view)
            except BaseException as exc:  # re-raised on the producer's thread
                self._error = exc
        self._give(self._hashed, _DONE)

    def _drain(self) -> None:
        """Second stage: write each hashed buffer, in order."""
        while (view := self._next(self._hashed)) is not _DONE:
            if self._error is not None:
                continue
            try:
                while view:
                    written = os.write(self._fd, view)
                    view = view[written:]
                    self._size += written
            except OSError as exc:
                self._error = ExtractError(
                    f"writing {self.path} failed: {exc.strerror or exc}; free some disk space "
                    "or choose another output location"
                )
