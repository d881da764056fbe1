"""A Hub model repository pinned to one commit, as a :class:`~app.engine.mtp.CheckpointSource`.

Why: the MTP heads are a few hundred MB inside checkpoints of hundreds of GB. The extractor asks
for small ranges (config, index, safetensors headers) and streamed spans (tensor data); here each
becomes one ranged GET against ``/resolve/<sha>/<file>``, so only those bytes cross the network and
no shard lands on disk. The repo is pinned to the commit id that ``model_info`` reports when the
source is opened, and every read uses that id: a branch that moves mid-job cannot mix two
revisions into one sidecar.

A streamed span that breaks off (connection reset, 5xx, timeout) is retried with backoff from the
byte already reached; the attempts are counted anew once a retry has made real progress. A
server that ignores ``Range`` (answers 200 with the whole file) gets the whole shard downloaded
once into scratch, and every later read of that shard is served from there.
Network and auth failures raise :class:`HubError`, never a "no MTP heads" error.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2
from huggingface_hub import HfApi, hf_hub_url
from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

from app import TOOL_NAME, __version__
from app.engine.errors import HubError
from app.engine.hub.failures import hub_error, is_transient
from app.engine.safepath import safe_join

DEFAULT_ATTEMPTS = 6
DEFAULT_BACKOFF_S = 0.5
MAX_BACKOFF_S = 8.0
TIMEOUT = httpx2.Timeout(connect=15.0, read=60.0, write=60.0, pool=15.0)
FALLBACK_CHUNK = 8 << 20
PROGRESS_FORGIVES = 1 << 20
"""Bytes received since the last failure that reset the failure count (a connection that keeps
breaking after a few bytes still runs out of attempts)."""


@dataclass(frozen=True)
class PinnedRepo:
    """A repository at one commit: its id, the commit, and its files' sizes at that commit."""

    repo_id: str
    sha: str
    file_sizes: Mapping[str, int]


def pin_repo(
    repo_id: str, revision: str = "main", *, endpoint: str, token: str | None
) -> PinnedRepo:
    """Resolve ``revision`` of ``repo_id`` to a commit id and list its files (one API call)."""
    api = HfApi(endpoint=endpoint, token=token, library_name=TOOL_NAME, library_version=__version__)
    try:
        info = api.model_info(repo_id, revision=revision, files_metadata=True)
    except Exception as exc:
        raise hub_error(exc, f"looking up {repo_id}@{revision} on {endpoint}", endpoint) from None
    if not info.sha or not info.siblings:
        raise HubError(f"{endpoint} returned no commit id or file list for {repo_id}@{revision}")
    sizes = {s.rfilename: int(s.size or 0) for s in info.siblings}
    return PinnedRepo(repo_id, info.sha, sizes)


class HubSource:
    """Reads the files of a pinned repo by ranged GETs (see the module docstring).

    ``fallback_dir``: where whole shards go when the server ignores Range (a private temporary
    folder under it, removed by :meth:`close`). ``log`` receives human-readable notices.
    """

    def __init__(
        self,
        pinned: PinnedRepo,
        *,
        endpoint: str,
        token: str | None,
        fallback_dir: Path | None = None,
        log: Callable[[str], None] | None = None,
        attempts: int = DEFAULT_ATTEMPTS,
        backoff_s: float = DEFAULT_BACKOFF_S,
    ) -> None:
        self.pinned = pinned
        self.endpoint = endpoint.rstrip("/")
        self._token = token
        self._fallback_parent = fallback_dir
        self._fallback_dir: Path | None = None
        self._whole_files: dict[str, Path] = {}
        self._log = log or (lambda _message: None)
        self._attempts = attempts
        self._backoff_s = backoff_s
        self.bytes_fetched = 0
        """Body bytes received from the Hub so far (every request, whole-shard fallbacks too)."""
        self.requests = 0

    # -- CheckpointSource ------------------------------------------------------------------

    @property
    def label(self) -> str:
        return f"{self.pinned.repo_id}@{self.pinned.sha}"

    def file_sizes(self) -> Mapping[str, int]:
        return self.pinned.file_sizes

    def read_bytes(self, path: str, start: int = 0, length: int | None = None) -> bytes:
        size = self._size_of(path)
        if length is None:
            length = max(0, size - start)
        return b"".join(self.iter_bytes(path, start, length, max(length, 1)))

    def iter_bytes(self, path: str, start: int, length: int, chunk_size: int) -> Iterator[bytes]:
        if chunk_size <= 0:
            raise ValueError(f"chunk_size must be positive, got {chunk_size}")
        size = self._size_of(path)
        if start < 0 or start + length > size:
            raise HubError(
                f"{self.label}/{path} has {size} bytes; bytes {start}..{start + length} were "
                "asked for: the index or a header does not match the file — report it"
            )
        if length == 0:
            return
        if path in self._whole_files:
            yield from _read_local(self._whole_files[path], start, length, chunk_size)
            return
        yield from self._stream_range(path, start, length, chunk_size)

    # -- streaming -------------------------------------------------------------------------

    def _stream_range(self, path: str, start: int, length: int, chunk_size: int) -> Iterator[bytes]:
        done = 0
        failures = 0
        done_at_last_failure = 0
        while done < length:
            first = start + done
            try:
                with self._get(path, f"bytes={first}-{start + length - 1}") as response:
                    if response.status_code == 200:
                        self._download_whole(path, response)
                        yield from _read_local(
                            self._whole_files[path], first, length - done, chunk_size
                        )
                        return
                    _check_range_answer(response, first, self.label, path)
                    # Pieces as they arrive (not re-buffered), so a break loses nothing.
                    for received in response.iter_bytes():
                        for offset in range(0, len(received), chunk_size):
                            chunk = received[offset : offset + chunk_size][: length - done]
                            self.bytes_fetched += len(chunk)
                            done += len(chunk)
                            if done - done_at_last_failure >= PROGRESS_FORGIVES:
                                failures = 0
                            yield chunk
                        if done >= length:
                            break
                if done < length:
                    raise httpx2.RemoteProtocolError("response ended before the requested range")
            except HubError:
                raise
            except Exception as exc:
                failures += 1
                done_at_last_failure = done
                if not is_transient(exc) or failures >= self._attempts:
                    what = f"reading {self.label}/{path} (bytes {start + done}..{start + length})"
                    raise hub_error(exc, what, self.endpoint) from None
                wait = min(MAX_BACKOFF_S, self._backoff_s * 2 ** (failures - 1))
                self._log(
                    f"reading {path} broke off at byte {start + done} ({type(exc).__name__}); "
                    f"resuming in {wait:.1f} s (attempt {failures + 1} of {self._attempts})"
                )
                time.sleep(wait)

    @contextmanager
    def _get(self, path: str, byte_range: str | None) -> Iterator[httpx2.Response]:
        url = hf_hub_url(
            self.pinned.repo_id, path, revision=self.pinned.sha, endpoint=self.endpoint
        )
        headers = build_hf_headers(
            token=self._token, library_name=TOOL_NAME, library_version=__version__
        )
        headers["Accept-Encoding"] = "identity"
        if byte_range:
            headers["Range"] = byte_range
        self.requests += 1
        with get_session().stream(
            "GET", url, headers=headers, timeout=TIMEOUT, follow_redirects=True
        ) as response:
            if response.status_code >= 400:
                response.read()
                hf_raise_for_status(response)
            yield response

    def _download_whole(self, path: str, response: httpx2.Response) -> None:
        """The server ignored Range: keep this whole answer as the shard's local copy."""
        total = int(response.headers.get("Content-Length") or self._size_of(path))
        folder = self._fallback_folder()
        target = safe_join(
            folder,
            path.replace("/", "--"),
            HubError,
            f"{self.label}: file",
            "the repository lists a file name that cannot be stored locally — report it",
        )
        partial = target.with_name(target.name + ".part")
        self._log(
            f"{self.endpoint} ignored the byte range for {path}: downloading the whole file "
            f"({total} bytes) into {folder} instead"
        )
        with open(partial, "wb") as out:
            for chunk in response.iter_bytes(FALLBACK_CHUNK):
                self.bytes_fetched += len(chunk)
                out.write(chunk)
        if partial.stat().st_size != self._size_of(path):
            partial.unlink()
            raise httpx2.RemoteProtocolError(f"whole-file download of {path} ended early")
        os.replace(partial, target)
        self._whole_files[path] = target

    def _fallback_folder(self) -> Path:
        if self._fallback_dir is None:
            if self._fallback_parent is not None:
                self._fallback_parent.mkdir(parents=True, exist_ok=True)
            self._fallback_dir = Path(
                tempfile.mkdtemp(prefix="hub-shards-", dir=self._fallback_parent)
            )
        return self._fallback_dir

    def _size_of(self, path: str) -> int:
        try:
            return self.pinned.file_sizes[path]
        except KeyError:
            raise HubError(
                f"{self.label} has no file {path}; the checkpoint's index names a file the "
                "repository does not contain at this commit"
            ) from None

    # -- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        """Remove any whole-shard fallback copies."""
        if self._fallback_dir is not None:
            shutil.rmtree(self._fallback_dir, ignore_errors=True)
            self._fallback_dir = None
            self._whole_files.clear()

    def __enter__(self) -> HubSource:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _check_range_answer(response: httpx2.Response, first: int, label: str, path: str) -> None:
    content_range = response.headers.get("Content-Range", "")
    if response.status_code != 206 or not content_range.startswith(f"bytes {first}-"):
        raise HubError(
            f"reading {label}/{path}: asked for bytes from {first}, got HTTP "
            f"{response.status_code} with Content-Range {content_range!r}; the server's range "
            "support is broken — report it"
        )


def _read_local(path: Path, start: int, length: int, chunk_size: int) -> Iterator[bytes]:
    with open(path, "rb") as handle:
        handle.seek(start)
        remaining = length
        while remaining > 0:
            piece = handle.read(min(chunk_size, remaining))
            if not piece:
                raise HubError(f"local copy {path} ended early; delete it and retry")
            remaining -= len(piece)
            yield piece
