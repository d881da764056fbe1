"""Where checkpoint bytes come from, so one extraction engine serves a local folder and a Hub repo.

The extractor never opens files itself: it asks a :class:`CheckpointSource` for file sizes, small
byte ranges (config, index, safetensors headers) and streamed spans (tensor data). A local folder
implements that with seeks; a Hub repository pinned to a commit implements it with ranged GETs
(one per streamed span), so only the MTP bytes ever cross the network.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import BinaryIO, Protocol, runtime_checkable

from app.engine.errors import ExtractError
from app.engine.safepath import escape_problem, relative_path_problem


@runtime_checkable
class CheckpointSource(Protocol):
    """Read-only access to the files of one checkpoint."""

    @property
    def label(self) -> str:
        """How messages name the checkpoint: a folder path, or ``owner/name@<sha>``."""
        ...

    def file_sizes(self) -> Mapping[str, int]:
        """Every file of the checkpoint: relative POSIX path → size in bytes."""
        ...

    def read_bytes(self, path: str, start: int = 0, length: int | None = None) -> bytes:
        """``length`` bytes of ``path`` from ``start`` (to the end when ``None``).

        Raises :class:`ExtractError` (or ``HubError``) if the file holds fewer bytes than asked.
        """
        ...

    def iter_bytes(self, path: str, start: int, length: int, chunk_size: int) -> Iterator[bytes]:
        """Stream exactly ``length`` bytes of ``path`` from ``start`` in pieces of ≤ ``chunk_size``.

        A Hub source makes one ranged GET per call. Raises :class:`ExtractError` (or
        ``HubError``) if the file ends before ``start + length``.
        """
        ...


class LocalFolderSource:
    """A checkpoint folder on disk (e.g. a ``hf download --local-dir`` of the original release).

    Files under hidden folders (``.git``, ``.cache``) are not part of the checkpoint and are not
    listed. A path that leaves the folder (``..``, absolute, or a symlink pointing out) is refused
    before it is opened, so a hostile index cannot copy another file into a sidecar. The one
    exception is the Hugging Face cache: a ``snapshots/<commit>`` folder's files are links to the
    repo's ``blobs`` folder, which is where they are allowed to point.
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder).expanduser()
        if not self.folder.exists():
            raise ExtractError(
                f"checkpoint folder {self.folder} does not exist; pass the folder that holds "
                "config.json and the *.safetensors shards"
            )
        if not self.folder.is_dir():
            raise ExtractError(
                f"{self.folder} is a file, not a checkpoint folder; pass the folder that holds "
                "config.json and the *.safetensors shards"
            )
        self._sizes: dict[str, int] | None = None

    @property
    def label(self) -> str:
        return str(self.folder)

    def file_sizes(self) -> Mapping[str, int]:
        if self._sizes is None:
            sizes: dict[str, int] = {}
            for path in sorted(self.folder.rglob("*")):
                relative = path.relative_to(self.folder)
                if any(part.startswith(".") for part in relative.parts[:-1]):
                    continue
                if path.is_file():
                    sizes[relative.as_posix()] = path.stat().st_size
            self._sizes = sizes
        return self._sizes

    def read_bytes(self, path: str, start: int = 0, length: int | None = None) -> bytes:
        with self._open(path) as handle:
            handle.seek(start)
            data = handle.read() if length is None else handle.read(length)
        if length is not None and len(data) != length:
            raise _short_file_error(self.folder / path, start, length, len(data))
        return data

    def iter_bytes(self, path: str, start: int, length: int, chunk_size: int) -> Iterator[bytes]:
        if chunk_size <= 0:
            raise ValueError(f"chunk_size must be positive, got {chunk_size}")
        with self._open(path) as handle:
            handle.seek(start)
            remaining = length
            while remaining > 0:
                piece = handle.read(min(chunk_size, remaining))
                if not piece:
                    raise _short_file_error(self.folder / path, start, length, length - remaining)
                remaining -= len(piece)
                yield piece

    def _allowed_roots(self) -> tuple[Path, ...]:
        if self.folder.parent.name == "snapshots":
            return (self.folder, self.folder.parent.parent / "blobs")
        return (self.folder,)

    def _open(self, path: str) -> BinaryIO:
        problem = relative_path_problem(path)
        if problem is None:
            escapes = [escape_problem(root, self.folder / path) for root in self._allowed_roots()]
            problem = None if None in escapes else escapes[0]
        if problem is not None:
            raise ExtractError(
                f"{self.folder}: checkpoint file {path!r} is refused: {problem}; every file of a "
                "checkpoint must be inside its folder — restore the original files"
            )
        full = self.folder / path
        try:
            return full.open("rb", buffering=0)
        except FileNotFoundError:
            raise ExtractError(
                f"{full} is missing from the checkpoint; re-download the checkpoint"
            ) from None


def _short_file_error(path: Path, start: int, length: int, got: int) -> ExtractError:
    return ExtractError(
        f"{path} is truncated: expected {length} bytes from offset {start} but the file ends "
        f"after {got}; re-download this file"
    )
