"""What the local hub sent and received, request by request and file by file.

Why: "fetch only the MTP bytes" and "a dry run sends no request" are claims about the network, so
tests prove them with the server's own counts — bytes of response body actually written per
request, summed per repository file — rather than trusting the client's account.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass


@dataclass(frozen=True)
class RequestRecord:
    """One finished (or dropped) request as the server saw it."""

    origin: str  # "api" (the main endpoint) or "storage" (the LFS/upload origin)
    method: str
    path: str
    status: int
    bytes_sent: int  # response body bytes written
    bytes_received: int  # request body bytes read
    repo_id: str | None = None
    file_path: str | None = None  # the repository file served, for file downloads
    byte_range: str | None = None  # the Range header as received
    dropped: bool = False  # the server cut the connection on purpose (fault injection)
    had_authorization: bool = False  # an Authorization header arrived (must not, on storage)


class Traffic:
    """Thread-safe log of every request, with the sums tests ask about.

    A client can have its whole answer before the server thread has logged the request, so
    every query first waits (up to ``SETTLE_S``) for requests in progress to be logged.
    """

    SETTLE_S = 5.0

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._records: list[RequestRecord] = []
        self._in_progress = 0

    def begin(self) -> None:
        with self._lock:
            self._in_progress += 1

    def record(self, record: RequestRecord) -> None:
        with self._lock:
            self._records.append(record)
            self._in_progress -= 1
            self._lock.notify_all()

    def reset(self) -> None:
        with self._lock:
            self._lock.wait_for(lambda: self._in_progress == 0, self.SETTLE_S)
            self._records.clear()

    def _settled(self) -> list[RequestRecord]:
        with self._lock:
            self._lock.wait_for(lambda: self._in_progress == 0, self.SETTLE_S)
            return list(self._records)

    def requests(self, method: str | None = None, origin: str | None = None) -> list[RequestRecord]:
        return [
            r
            for r in self._settled()
            if (method is None or r.method == method) and (origin is None or r.origin == origin)
        ]

    def count(self) -> int:
        return len(self._settled())

    def bytes_served(self, repo_id: str | None = None, file_path: str | None = None) -> int:
        """Body bytes sent for repository files, optionally for one repo and one file."""
        return sum(
            r.bytes_sent
            for r in self._settled()
            if r.file_path is not None
            and (repo_id is None or r.repo_id == repo_id)
            and (file_path is None or r.file_path == file_path)
        )

    def bytes_served_per_file(self) -> dict[tuple[str, str], int]:
        totals: dict[tuple[str, str], int] = defaultdict(int)
        for r in self._settled():
            if r.file_path is not None and r.repo_id is not None:
                totals[(r.repo_id, r.file_path)] += r.bytes_sent
        return dict(totals)

    def bytes_received(self, origin: str | None = None) -> int:
        return sum(r.bytes_received for r in self._settled() if origin in (None, r.origin))
