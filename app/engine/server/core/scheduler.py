"""One model's requests: a bounded FIFO in front of the model, run as many at a time as its runner
can.

Every model a request names has its own scheduler, so requests for different models run at the
same time (each model in its own worker) while requests for one model queue here. A daemon thread
takes the oldest waiting job, gets the model from the pool (loading it on demand, which may wait
for memory: :mod:`app.engine.server.models.pool`), and starts up to
:attr:`~app.engine.server.models.runner.ModelRunner.sequences` jobs at once, each read in a
thread of its own (a llama.cpp model decodes ``--parallel N`` in one context:
docs/server-api.md#several-clients). It hands the model back when no job runs or waits, or
between jobs when another model waits for its memory. Each job streams its chunks back to the
request's event loop. A full queue refuses at once (the handler answers 503 with Retry-After) and
a cancelled job (its client went away) leaves the queue at once, freeing its place, or is stopped
if running. A worker killed by an illegal instruction fails its job and is reported through
``on_unrunnable`` (``serve`` stops with it): every later job would crash the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import secrets
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from app.engine.errors import MtpStudioError, UnrunnableBuildError, WorkerStopped
from app.engine.runtime.core.request import GenerationRequest, GenerationResult, TokenChunk
from app.engine.runtime.process.client import GenerationStream
from app.engine.server.models.runner import ModelRunner

RECENT_DURATIONS = 16
_POLL_SECONDS = 0.5
"""How often an idle-but-leased scheduler asks whether another model wants its memory."""


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


@dataclass(frozen=True)
class JobOrigin:
    """Who asked, for the server's status: the endpoint, whether the reply streams, and the
    client's address."""

    endpoint: str = ""
    stream: bool = False
    client: str = ""


@dataclass(frozen=True)
class JobStatus:
    """A job as ``/v1/status`` shows it (never its prompt or text)."""

    id: str
    model: str
    state: str
    origin: JobOrigin
    seconds: float
    """Waiting: how long it has waited; running: how long it has run."""
    generated_tokens: int
    tokens_per_second: float


class RunnerSource(Protocol):
    """Where a scheduler gets its model (:class:`~app.engine.server.models.pool.PoolLease`)."""

    def acquire(self, still_needed: Callable[[], bool]) -> ModelRunner | None: ...

    def release(self) -> None: ...

    def wanted(self) -> bool: ...


class QueueFull(Exception):
    def __init__(self, waiting: int, retry_after_seconds: int) -> None:
        super().__init__(f"{waiting} waiting")
        self.waiting = waiting
        self.retry_after_seconds = retry_after_seconds


class Job:
    """A queued generation; its events arrive on :attr:`events` in the submitting event loop,
    and :attr:`started` is set there once its generation starts."""

    def __init__(
        self,
        request: GenerationRequest,
        loop: asyncio.AbstractEventLoop,
        withdraw: Callable[[Job], None],
        origin: JobOrigin = JobOrigin(),
    ) -> None:
        self.request = request
        self.origin = origin
        self.id = secrets.token_hex(4)
        self.events: asyncio.Queue[JobEvent] = asyncio.Queue()
        self.started = asyncio.Event()
        self._loop = loop
        self._withdraw = withdraw
        self._lock = threading.Lock()
        self._stream: GenerationStream | None = None
        self.cancelled = False
        self.queued_at = time.monotonic()
        self.started_at: float | None = None
        self.generated_tokens = 0

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
            self.started_at = time.monotonic()
        with contextlib.suppress(RuntimeError):  # the server's loop already closed
            self._loop.call_soon_threadsafe(self.started.set)
        return self._stream

    def _post(self, event: JobEvent) -> None:
        if isinstance(event, TokenChunk):
            self.generated_tokens += len(event.token_ids)
        with contextlib.suppress(RuntimeError):  # the server's loop already closed
            self._loop.call_soon_threadsafe(self.events.put_nowait, event)

    def status(self, model: str, now: float) -> JobStatus:
        started = self.started_at
        if started is None:
            return JobStatus(self.id, model, "waiting", self.origin, now - self.queued_at, 0, 0.0)
        running = max(now - started, 1e-9)
        rate = self.generated_tokens / running
        return JobStatus(
            self.id, model, "running", self.origin, running, self.generated_tokens, rate
        )


class Scheduler:
    """Runs ``model``'s jobs on the runner ``source`` lends; at most ``queue_size`` wait."""

    def __init__(
        self,
        source: RunnerSource,
        queue_size: int,
        on_finished: Callable[[GenerationResult], None] | None = None,
        model: str = "",
        on_unrunnable: Callable[[UnrunnableBuildError], None] | None = None,
    ) -> None:
        self._source = source
        self._queue_size = queue_size
        self.model = model
        self._waiting: deque[Job] = deque()
        self._running: set[Job] = set()
        self._threads: set[threading.Thread] = set()
        self._changed = threading.Condition()
        self._stopping = False
        self._loading = False
        self._on_finished = on_finished
        self._on_unrunnable = on_unrunnable
        self._recent_seconds: deque[float] = deque(maxlen=RECENT_DURATIONS)
        self._thread = threading.Thread(
            target=self._dispatch, name=f"mtp-studio-scheduler {model}", daemon=True
        )

    @property
    def waiting(self) -> int:
        with self._changed:
            return len(self._waiting)

    @property
    def running(self) -> int:
        with self._changed:
            return len(self._running)

    @property
    def busy(self) -> bool:
        return self.running > 0

    @property
    def loading(self) -> bool:
        """Whether the model is being fetched from the pool (loaded, or waiting for room)."""
        return self._loading

    def position(self, job: Job) -> int | None:
        """How many jobs wait before ``job`` (None once it no longer waits)."""
        with self._changed:
            try:
                return self._waiting.index(job)
            except ValueError:
                return None

    def jobs(self) -> tuple[JobStatus, ...]:
        now = time.monotonic()
        with self._changed:
            jobs = [*self._running, *self._waiting]
        return tuple(job.status(self.model, now) for job in jobs)

    def start(self) -> None:
        self._thread.start()

    def submit(self, request: GenerationRequest, origin: JobOrigin | None = None) -> Job:
        """Queue ``request``; raises :class:`QueueFull` when no place is left."""
        job = Job(request, asyncio.get_running_loop(), self._withdraw, origin or JobOrigin())
        with self._changed:
            if len(self._waiting) >= self._queue_size:
                raise QueueFull(len(self._waiting), self._retry_after_seconds())
            self._waiting.append(job)
            self._changed.notify_all()
        return job

    def stop(self) -> None:
        """Cancel the running jobs, refuse the waiting ones, end the threads, hand the model
        back (the pool unloads it)."""
        with self._changed:
            self._stopping = True
            refused, self._waiting = list(self._waiting), deque()
            running = list(self._running)
            self._changed.notify_all()
        for job in refused:
            job._post(JobFailed("the server is shutting down", user_error=True))
        for job in running:
            job.cancel()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def _withdraw(self, job: Job) -> None:
        with self._changed, contextlib.suppress(ValueError):
            self._waiting.remove(job)

    def _retry_after_seconds(self) -> int:
        """About how long until a place frees: the mean recent request time (1 s before any)."""
        if not self._recent_seconds:
            return 1
        return max(1, math.ceil(sum(self._recent_seconds) / len(self._recent_seconds)))

    # --- the dispatcher thread ----------------------------------------------------------------

    def _dispatch(self) -> None:
        runner: ModelRunner | None = None
        try:
            while not self._stopping:
                if runner is None:
                    if self._wait_for(lambda: bool(self._waiting)):
                        runner = self._acquire()
                    continue
                if self._running_none_and(lambda: not self._waiting) or self._yield_turn():
                    self._source.release()
                    runner = None
                    continue
                job = self._next_job(runner)
                if job is not None:
                    self._start_job(runner, job)
        finally:
            self._join_jobs()
            if runner is not None:
                self._source.release()

    def _wait_for(self, ready: Callable[[], bool]) -> bool:
        """Wait (lock held inside) until ``ready()`` or stop; True when ready."""
        with self._changed:
            while not self._stopping and not ready():
                self._changed.wait()
            return not self._stopping

    def _running_none_and(self, condition: Callable[[], bool]) -> bool:
        with self._changed:
            return not self._running and condition()

    def _yield_turn(self) -> bool:
        """Nothing runs and another model waits for this one's memory: hand it back."""
        return self._running_none_and(lambda: True) and self._source.wanted()

    def _acquire(self) -> ModelRunner | None:
        self._loading = True
        try:
            return self._source.acquire(
                still_needed=lambda: self.waiting > 0 and not self._stopping
            )
        except UnrunnableBuildError as exc:  # the model's worker died by SIGILL while loading
            self._fail_waiting(JobFailed(str(exc), user_error=True, unrunnable=True))
            self._report_unrunnable(exc)
        except MtpStudioError as exc:
            self._fail_waiting(JobFailed(str(exc), user_error=True))
        except Exception:
            self._fail_waiting(JobFailed(traceback.format_exc(), user_error=False))
        finally:
            self._loading = False
        return None

    def _fail_waiting(self, failure: JobFailed) -> None:
        """The model could not be loaded: every job waiting for it gets the reason."""
        with self._changed:
            failed, self._waiting = list(self._waiting), deque()
        for job in failed:
            job._post(failure)

    def _next_job(self, runner: ModelRunner) -> Job | None:
        """The oldest waiting job once a sequence is free (None: woke to check again)."""
        with self._changed:
            if not self._waiting or len(self._running) >= runner.sequences:
                self._changed.wait(_POLL_SECONDS)
                return None
            job = self._waiting.popleft()
            self._running.add(job)
            return job

    def _start_job(self, runner: ModelRunner, job: Job) -> None:
        thread = threading.Thread(
            target=self._run_job, args=(runner, job), name=f"mtp-studio-job {job.id}", daemon=True
        )
        with self._changed:
            self._threads.add(thread)
        thread.start()

    def _run_job(self, runner: ModelRunner, job: Job) -> None:
        started = time.monotonic()
        try:
            self._generate(runner, job)
        finally:
            with self._changed:
                self._running.discard(job)
                self._threads.discard(threading.current_thread())
                self._recent_seconds.append(time.monotonic() - started)
                self._changed.notify_all()

    def _generate(self, runner: ModelRunner, job: Job) -> None:
        try:
            stream = job._attach(lambda: runner.start(job.request))
            if stream is None:
                return
            for chunk in stream:
                job._post(chunk)
            result = stream.wait()
        except UnrunnableBuildError as exc:
            job._post(JobFailed(str(exc), user_error=True, unrunnable=True))
            self._report_unrunnable(exc)
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

    def _report_unrunnable(self, error: UnrunnableBuildError) -> None:
        if self._on_unrunnable is not None:
            self._on_unrunnable(error)

    def _join_jobs(self) -> None:
        with self._changed:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout=30)
