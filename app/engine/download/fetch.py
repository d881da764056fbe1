"""Ranged GETs into a partial file that resume from the byte reached.

huggingface_hub (since 1.18) does not resume across runs, so downloads do their own HTTP: the
partial file's size *is* the resume point, whether the last attempt ended in a network drop, a
pause, a cancel or the app being killed. Transient failures (connection lost, timeout, 5xx, 429)
are retried with back-off, and the counter resets whenever bytes arrive; a server that ignores
``Range`` is handled by starting the file over rather than appending a second copy.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx2
from huggingface_hub.utils import get_session

from app.engine.download.pause import PauseToken
from app.engine.errors import DownloadError
from app.engine.jobs import CancelToken
from app.engine.units import format_bytes

_RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_CONTENT_RANGE = re.compile(r"bytes (\d+)-\d+/(\d+|\*)")


@dataclass(frozen=True)
class FetchPolicy:
    """How patient a download is; tests shorten the waits, nothing else changes."""

    attempts: int = 6
    first_wait_seconds: float = 1.0
    max_wait_seconds: float = 16.0
    read_timeout_seconds: float = 30.0
    connect_timeout_seconds: float = 10.0


class _Transient(Exception):
    """A failure worth another attempt (network drop, timeout, 5xx)."""


@dataclass
class FetchCallbacks:
    """How the fetch reports: bytes arrived, a log line, paused/resumed."""

    on_bytes: Callable[[int], None]
    on_rewind: Callable[[int], None]
    log: Callable[[str], None]
    on_pause_change: Callable[[bool], None]


def partial_size(partial: Path) -> int:
    try:
        return partial.stat().st_size
    except FileNotFoundError:
        return 0


def fetch_to_partial(
    url: str,
    partial: Path,
    size: int,
    headers: dict[str, str],
    cancel: CancelToken,
    pause: PauseToken,
    callbacks: FetchCallbacks,
    policy: FetchPolicy = FetchPolicy(),
) -> None:
    """Grow ``partial`` until it holds ``size`` bytes; raise DownloadError or JobCancelled."""
    partial.parent.mkdir(parents=True, exist_ok=True)
    failures = 0
    while True:
        offset = partial_size(partial)
        if offset > size:
            callbacks.log(f"{partial.name} is larger than expected; starting it over")
            callbacks.on_rewind(offset)
            partial.unlink()
            offset = 0
        if offset == size:
            return
        if pause.paused:
            callbacks.on_pause_change(True)
            pause.wait_while_paused(cancel)
            callbacks.on_pause_change(False)
        if cancel.cancelled:
            return
        try:
            _one_attempt(url, partial, offset, size, headers, pause, callbacks, policy)
            failures = 0 if partial_size(partial) > offset else failures
        except _Transient as exc:
            failures = 0 if partial_size(partial) > offset else failures + 1
            if failures >= policy.attempts:
                raise DownloadError(
                    f"giving up on {url} after {failures} failed attempts ({exc}); "
                    f"{format_bytes(partial_size(partial))} of {format_bytes(size)} are kept in "
                    f"{partial} — run the download again to resume"
                ) from None
            wait = min(
                policy.max_wait_seconds, policy.first_wait_seconds * 2 ** max(failures - 1, 0)
            )
            callbacks.log(
                f"connection problem at {format_bytes(partial_size(partial))} "
                f"({exc}); resuming in {wait:.0f} s"
            )
            _sleep_unless_cancelled(wait, cancel)


def _one_attempt(
    url: str,
    partial: Path,
    offset: int,
    size: int,
    headers: dict[str, str],
    pause: PauseToken,
    callbacks: FetchCallbacks,
    policy: FetchPolicy,
) -> None:
    request_headers = {**headers, "Range": f"bytes={offset}-", "Accept-Encoding": "identity"}
    try:
        with get_session().stream(
            "GET",
            url,
            headers=request_headers,
            timeout=httpx2.Timeout(
                policy.read_timeout_seconds, connect=policy.connect_timeout_seconds
            ),
            follow_redirects=True,
        ) as response:
            if response.status_code == 416:
                callbacks.log(f"the server refused to resume at byte {offset}; starting over")
                callbacks.on_rewind(offset)
                partial.unlink(missing_ok=True)
                return
            if response.status_code in _RETRYABLE_STATUS:
                raise _Transient(f"HTTP {response.status_code}")
            if response.status_code >= 400:
                raise DownloadError(
                    f"the Hub answered HTTP {response.status_code} for {url}; check that the "
                    "file still exists and that you may read the repo (sign in under Settings)"
                )
            start = _start_of_body(response, offset)
            if start != offset:
                callbacks.log("the server ignored the resume request; starting the file over")
                callbacks.on_rewind(offset)
            with partial.open("r+b" if partial.exists() else "wb") as out:
                out.seek(start)
                out.truncate()
                for chunk in response.iter_bytes():
                    if start + len(chunk) > size:
                        raise _Transient("the server sent more bytes than the file has")
                    out.write(chunk)
                    start += len(chunk)
                    callbacks.on_bytes(len(chunk))
                    if pause.paused:
                        return
            if start < size:
                raise _Transient(f"connection closed at byte {start} of {size}")
    except (httpx2.TransportError, httpx2.StreamError) as exc:
        raise _Transient(type(exc).__name__) from None


def _start_of_body(response: httpx2.Response, offset: int) -> int:
    """Where the body starts in the file: 0 for a full answer, ``offset`` for a matching 206."""
    if response.status_code != 206:
        return 0
    match = _CONTENT_RANGE.match(response.headers.get("Content-Range", ""))
    if match is None or int(match.group(1)) != offset:
        raise _Transient(f"unexpected Content-Range {response.headers.get('Content-Range')!r}")
    return offset


def _sleep_unless_cancelled(seconds: float, cancel: CancelToken) -> None:
    deadline = time.monotonic() + seconds
    while not cancel.cancelled and time.monotonic() < deadline:
        time.sleep(min(0.1, deadline - time.monotonic()))
