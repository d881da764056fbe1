"""One model, one generation at a time: a bounded FIFO of requests in front of the worker.

The runtime's worker runs one generation at a time, so HTTP requests queue here. A thread owns the
:class:`RuntimeClient` and runs the jobs in arrival order; each job streams its chunks back to the
request's event loop. A full queue refuses at once (the handler answers 503 with Retry-After) and
a cancelled job (its client went away) leaves the queue at once, freeing its place, or is stopped
if running. A worker killed by an illegal instruction fails its job and is reported through
``on_unrunnable`` (``serve`` stops with it): every later job would crash the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from app.engine.errors import MtpStudioError, UnrunnableBuildError, WorkerStopped
from app.engine.runtime.core.request import GenerationRequest, GenerationResult, TokenChunk
from app.engine.runtime.process.client import GenerationStream, RuntimeClient

RECENT_DURATIONS = 16


@dataclass(frozen=True)
class JobFailed:
    """The generation could not run: ``user_error`` False means a bug in the server or runtime;
    ``unrunnable``: the inference library cannot run on this machine (the server stops);
    ``worker_stopped``: the worker process died under it (the next job starts a fresh one)."""

    message: str
    user_error: bool
    unrunnable: bool = False
    worker_stopped: bool = False


JobEvent = TokenChunk | GenerationResult | JobFailed
"""What a job posts: chunks, then exactly one result or failure."""


class QueueFull(Exception):
    def __init__(self, waiting: int, retry_after_seconds: int) -> None:
        super().__init__(f"{waiting} waiting")
        self.waiting = waiting
        self.retry_after_seconds = retry_after_seconds


class Job:
    """A queued generation; its events arrive on :attr:`events` in the submitting event loop."""

    def __init__(
        self,
        request: GenerationRequest,
        loop: asyncio.AbstractEventLoop,
        withdraw: Callable[[Job], None],
    ) -> None:
        self.request = request
        self.events: asyncio.Queue[JobEvent] = asyncio.Queue()
        self._loop = loop
        self._withdraw = withdraw
        self._lock = threading.Lock()
        self._stream: GenerationStream | None = None
        self.cancelled = False

    def cancel(self) -> None:
        """Thread-safe: take the job out of the queue if it waits, stop its generation if it
        runs."""
        with self._lock:
            self.cancelled = True
            stream = self._stream
        if stream is not None:
            stream.cancel()
        else:
            self._withdraw(self)

    def _attach(self, stream_factory: Callable[[], GenerationStream]) -> GenerationStream | None:
        with self._lock:
            if self.cancelled:
                return None
            self._stream = stream_factory()
            return self._stream

    def _post(self, event: JobEvent) -> None:
        with contextlib.suppress(RuntimeError):  # the server's loop already closed
            self._loop.call_soon_threadsafe(self.events.put_nowait, event)


class Scheduler:
    """Runs jobs on ``client`` one at a time in a daemon thread; at most ``queue_size`` wait."""

    def __init__(
        self,
        client: RuntimeClient,
        queue_size: int,
        on_finished: Callable[[GenerationResult], None] | None = None,
        on_unrunnable: Callable[[UnrunnableBuildError], None] | None = None,
    ) -> None:
        self._client = client
        self._queue_size = queue_size
        self._waiting: deque[Job] = deque()
        self._changed = threading.Condition()
        self._stopping = False
        self._on_finished = on_finished
        self._on_unrunnable = on_unrunnable
        self._recent_seconds: deque[float] = deque(maxlen=RECENT_DURATIONS)
        self._running: Job | None = None
        self._thread = threading.Thread(target=self._run, name="mtp-studio-scheduler", daemon=True)

    @property
    def waiting(self) -> int:
        with self._changed:
            return len(self._waiting)

    @property
    def busy(self) -> bool:
        return self._running is not None

    def start(self) -> None:
        self._thread.start()

    def submit(self, request: GenerationRequest) -> Job:
        """Queue ``request``; raises :class:`QueueFull` when no place is left."""
        job = Job(request, asyncio.get_running_loop(), self._withdraw)
        with self._changed:
            if len(self._waiting) >= self._queue_size:
                raise QueueFull(len(self._waiting), self._retry_after_seconds())
            self._waiting.append(job)
            self._changed.notify()
        return job

    def stop(self) -> None:
        """Cancel the running job, refuse the waiting ones, end the thread (the client stays)."""
        with self._changed:
            self._stopping = True
            refused, self._waiting = list(self._waiting), deque()
            self._changed.notify()
        for job in refused:
            job._post(JobFailed("the server is shutting down", user_error=True))
        running = self._running
        if running is not None:
            running.cancel()
        self._thread.join(timeout=30)

    def _withdraw(self, job: Job) -> None:
        with self._changed, contextlib.suppress(ValueError):
            self._waiting.remove(job)

    def _next(self) -> Job | None:
        """The oldest waiting job; None once the scheduler stops."""
        with self._changed:
            while not self._waiting and not self._stopping:
                self._changed.wait()
            if self._stopping:
                return None
            return self._waiting.popleft()

    def _retry_after_seconds(self) -> int:
        """About how long until a place frees: the mean recent request time (1 s before any)."""
        if not self._recent_seconds:
            return 1
        return max(1, math.ceil(sum(self._recent_seconds) / len(self._recent_seconds)))

    def _run(self) -> None:
        while (job := self._next()) is not None:
            self._running = job
            started = time.monotonic()
            try:
                self._run_job(job)
            finally:
                self._running = None
                self._recent_seconds.append(time.monotonic() - started)

    def _run_job(self, job: Job) -> None:
        try:
            stream = job._attach(lambda: self._client.start(job.request))
            if stream is None:
                return
            for chunk in stream:
                job._post(chunk)
            result = stream.wait()
        except UnrunnableBuildError as exc:
            job._post(JobFailed(str(exc), user_error=True, unrunnable=True))
            if self._on_unrunnable is not None:
                self._on_unrunnable(exc)
            return
        except WorkerStopped as exc:
            job._post(JobFailed(str(exc), user_error=False, worker_stopped=True))
            return
        except MtpStudioError as exc:
            job._post(JobFailed(str(exc), user_error=True))
            return
        except Exception:
            job._post(JobFailed(traceback.format_exc(), user_error=False))
            return
        if self._on_finished is not None:
            self._on_finished(result)
        job._post(result)
