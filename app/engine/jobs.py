"""The job model shared by every long task (publish, download, extraction, benchmark).

A job is a plain function that takes a :class:`JobContext`. It reports what it does as structured
events through ``ctx.emit`` and checks ``ctx.check_cancelled()`` between steps. The CLI renders the
events as progress lines, the GUI turns them into Qt signals on the main thread, and the job store
persists them — one protocol for all, so no front end needs to know what a job does inside.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.engine.errors import JobCancelled


@dataclass(frozen=True)
class StageEvent:
    """A job entered a named stage (e.g. ``pin``, ``detect``, ``fetch``, ``upload``)."""

    stage: str
    detail: str = ""


@dataclass(frozen=True)
class ProgressEvent:
    """Bytes (or items) done out of a total within the current stage; ``total`` 0 means unknown."""

    stage: str
    done: int
    total: int
    unit: str = "B"


@dataclass(frozen=True)
class LogEvent:
    """A human-readable line for the job's log."""

    message: str
    level: str = "info"


@dataclass(frozen=True)
class ResultEvent:
    """The job finished; ``summary`` is JSON-serialisable and shown in the monitor."""

    summary: dict[str, Any]


JobEvent = StageEvent | ProgressEvent | LogEvent | ResultEvent
EventSink = Callable[[JobEvent], None]


class CancelToken:
    """A thread-safe flag a front end sets to ask a running job to stop."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


def _discard(_event: JobEvent) -> None:
    """The sink used when nobody listens."""


@dataclass
class JobContext:
    """What a job receives: where to report, and how to know it should stop."""

    emit: EventSink = _discard
    cancel: CancelToken = field(default_factory=CancelToken)

    def check_cancelled(self) -> None:
        """Raise :class:`JobCancelled` if the front end asked the job to stop."""
        if self.cancel.cancelled:
            raise JobCancelled("cancelled by the user")

    def stage(self, name: str, detail: str = "") -> None:
        self.check_cancelled()
        self.emit(StageEvent(name, detail))

    def log(self, message: str, level: str = "info") -> None:
        self.emit(LogEvent(message, level))

    def progress_reporter(self, stage: str, total: int, unit: str = "B") -> ProgressReporter:
        return ProgressReporter(self, stage, total, unit)


class ProgressReporter:
    """Throttles progress events to at most one per 1% of the total or per second.

    Every call also checks for cancellation, so a job that reports progress is cancellable at
    the same granularity.
    """

    def __init__(self, ctx: JobContext, stage: str, total: int, unit: str = "B") -> None:
        self._ctx = ctx
        self._stage = stage
        self.total = total
        self._unit = unit
        self.done = 0
        self._last_emit_done = -1
        self._last_emit_time = 0.0

    def advance(self, amount: int) -> None:
        self.update(self.done + amount)

    def update(self, done: int) -> None:
        self._ctx.check_cancelled()
        self.done = done
        now = time.monotonic()
        step = max(1, self.total // 100) if self.total else 0
        finished = self.total and done >= self.total
        if (
            finished
            or (step and done - self._last_emit_done >= step)
            or now - self._last_emit_time >= 1.0
        ):
            if done == self._last_emit_done:
                return
            self._last_emit_done = done
            self._last_emit_time = now
            self._ctx.emit(ProgressEvent(self._stage, done, self.total, self._unit))
