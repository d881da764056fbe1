"""Speed and time-left from a stream of byte counts, the same in the CLI and the GUI.

A moving window (not the average since the start) so the figure follows a network that speeds
up or slows down, and resumed bytes (already on disk) never inflate the speed: only bytes that
arrive while this meter watches count.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class RateReading:
    bytes_per_second: float
    seconds_left: float | None  # None while unknown


class TransferRate:
    """Feed it ``(done, total)`` as progress arrives; read speed and ETA back."""

    def __init__(self, window_seconds: float = 5.0) -> None:
        self._window = window_seconds
        self._samples: deque[tuple[float, int]] = deque()

    def update(self, done: int, total: int, now: float | None = None) -> RateReading:
        now = time.monotonic() if now is None else now
        if self._samples and done < self._samples[-1][1]:
            self._samples.clear()  # the transfer started over: old samples mean nothing
        self._samples.append((now, done))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self._window:
            self._samples.popleft()
        first_time, first_done = self._samples[0]
        elapsed = now - first_time
        speed = (done - first_done) / elapsed if elapsed > 0 else 0.0
        left = (total - done) / speed if speed > 0 and total > 0 else None
        return RateReading(speed, left)


def format_duration(seconds: float | None) -> str:
    """``3725`` → ``'1h 2m'``, ``95`` → ``'1m 35s'``, ``None`` → ``'—'``."""
    if seconds is None:
        return "—"
    whole = int(seconds + 0.5)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"
