"""Failures the local hub injects on purpose, so retry, resume and clean-up paths get tested.

Why: a publish or download that only ever met a perfect network proves little. Each fault is
armed for a number of requests (``times``; ``None`` = until cleared) and matches requests by a
substring of their subject: ``<repo_id>/<path>`` for file downloads, ``<repo_id>`` for uploads,
the URL path for ``slow``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Literal

FaultKind = Literal["drop_download", "drop_upload", "fail_part", "slow", "ignore_range"]


@dataclass
class Fault:
    kind: FaultKind
    match: str = ""
    after_bytes: int = 0
    part_number: int | None = None
    delay_s: float = 0.0
    times: int | None = 1


class FaultPlan:
    """The armed faults of one server; every method is safe to call from tests while it runs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []

    def drop_download(self, match: str = "", after_bytes: int = 0, times: int | None = 1) -> None:
        """Cut the connection after sending ``after_bytes`` of a matching file's body."""
        self._arm(Fault("drop_download", match, after_bytes=after_bytes, times=times))

    def drop_upload(self, match: str = "", after_bytes: int = 0, times: int | None = 1) -> None:
        """Cut the connection after receiving ``after_bytes`` of an upload (PUT) body."""
        self._arm(Fault("drop_upload", match, after_bytes=after_bytes, times=times))

    def fail_part(self, part_number: int, times: int | None = 1, match: str = "") -> None:
        """Answer 500 to the PUT of multipart part ``part_number`` (1-based)."""
        self._arm(Fault("fail_part", match, part_number=part_number, times=times))

    def slow(self, match: str = "", delay_s: float = 0.5, times: int | None = None) -> None:
        """Wait ``delay_s`` before answering each matching request."""
        self._arm(Fault("slow", match, delay_s=delay_s, times=times))

    def ignore_range(self, match: str = "", times: int | None = None) -> None:
        """Answer 200 with the whole file to Range requests, like a server without Range support."""
        self._arm(Fault("ignore_range", match, times=times))

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def take(
        self,
        kind: FaultKind,
        subject: str,
        part_number: int | None = None,
        body_size: int | None = None,
    ) -> Fault | None:
        """The first armed fault of ``kind`` matching ``subject``, using up one of its times.

        A drop fault only matches a body longer than its ``after_bytes`` (``body_size``), so it
        is never spent on a response or upload it could not cut short.
        """
        with self._lock:
            for fault in self._faults:
                if fault.kind != kind or fault.match not in subject:
                    continue
                if fault.part_number is not None and fault.part_number != part_number:
                    continue
                if body_size is not None and fault.after_bytes >= body_size:
                    continue
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                return fault
        return None

    def _arm(self, fault: Fault) -> None:
        with self._lock:
            self._faults.append(fault)
