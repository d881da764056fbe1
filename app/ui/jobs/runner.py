"""The bridge between engine jobs and the GUI thread.

Jobs run in worker threads; the GUI thread never waits on one. Workers only put events on a
queue (and the job store records them from the worker thread, so no disk I/O lands on the GUI
thread either). A 50 ms timer on the GUI thread drains the queue, keeps only the latest progress
of each job (a fast job cannot flood the event loop) and re-emits everything as signals.
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass

from PySide6.QtCore import QObject, QTimer, Signal

from app.engine.errors import JobCancelled, MtpStudioError
from app.engine.jobs import CancelToken, JobContext, JobEvent, ProgressEvent
from app.engine.store import JobSpec, JobState, JobStore, run_recorded
from app.engine.store.kinds import JobFunction, Pausable, build_job
from app.ui.wording import in_window_words

log = logging.getLogger(__name__)

DRAIN_INTERVAL_MS = 50
QUIT_REASON = "the app was closed while this job was running; retry it to continue"


@dataclass(frozen=True)
class _Finished:
    state: JobState
    message: str


@dataclass
class _Running:
    job: JobFunction
    cancel: CancelToken
    thread: threading.Thread
    quitting: bool = False


class JobRunner(QObject):
    """Starts, cancels, pauses and retries jobs; every job is recorded in the job store.

    Signals (always delivered on the GUI thread):
    - ``job_started(job_id)`` once the job's row exists and its thread runs,
    - ``job_events(job_id, events)`` with the events since the last delivery (progress coalesced),
    - ``job_finished(job_id, state, message)``; ``message`` is the readable error, if any.
    """

    job_started = Signal(int)
    job_events = Signal(int, list)
    job_finished = Signal(int, str, str)
    pause_changed = Signal(int, bool)

    def __init__(self, store: JobStore, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self._inbox: queue.SimpleQueue[tuple[int, JobEvent | _Finished]] = queue.SimpleQueue()
        self._running: dict[int, _Running] = {}
        self._timer = QTimer(self)
        self._timer.setInterval(DRAIN_INTERVAL_MS)
        self._timer.timeout.connect(self._drain)
        self._timer.start()

    # -- control ------------------------------------------------------------------------------

    def start(
        self, spec: JobSpec, job: JobFunction | None = None, retry_of: int | None = None
    ) -> int:
        """Record ``spec`` and run ``job`` (or the job its kind builds) in a worker thread."""
        job = job if job is not None else build_job(spec)
        job_id = self.store.create(spec, retry_of=retry_of)
        cancel = CancelToken()
        thread = threading.Thread(
            target=self._work, args=(job_id, job, cancel), name=f"job-{job_id}", daemon=True
        )
        self._running[job_id] = _Running(job, cancel, thread)
        thread.start()
        self.job_started.emit(job_id)
        return job_id

    def retry(self, job_id: int) -> int:
        """Run a finished job again from its stored spec (a download resumes where it stopped)."""
        record = self.store.get(job_id)
        if not record.state.final:
            raise MtpStudioError(f"job {job_id} is still {record.state}; wait for it or cancel it")
        return self.start(record.spec, retry_of=job_id)

    def cancel(self, job_id: int) -> None:
        running = self._running.get(job_id)
        if running is not None:
            running.cancel.cancel()
            if isinstance(running.job, Pausable) and running.job.paused:
                running.job.resume()  # a paused job wakes up to see the cancel

    def set_paused(self, job_id: int, paused: bool) -> None:
        running = self._running.get(job_id)
        if running is None or not isinstance(running.job, Pausable):
            return
        if paused:
            running.job.pause()
        else:
            running.job.resume()
        self.pause_changed.emit(job_id, paused)

    def is_running(self, job_id: int) -> bool:
        return job_id in self._running

    def can_pause(self, job_id: int) -> bool:
        running = self._running.get(job_id)
        return running is not None and isinstance(running.job, Pausable)

    def is_paused(self, job_id: int) -> bool:
        running = self._running.get(job_id)
        return running is not None and isinstance(running.job, Pausable) and running.job.paused

    def running_jobs(self) -> list[int]:
        return list(self._running)

    def shutdown(self, wait_seconds: float = 3.0) -> None:
        """Stop every job (the app is closing) and record them as interrupted, so they can be
        retried after the next start; partial downloads are kept."""
        for job_id, running in list(self._running.items()):
            running.quitting = True
            self.cancel(job_id)
        for running in list(self._running.values()):
            running.thread.join(wait_seconds)
        for job_id, running in list(self._running.items()):
            if running.thread.is_alive():  # stuck in a call that cannot be interrupted
                self.store.finish(job_id, JobState.INTERRUPTED, QUIT_REASON)
        self._timer.stop()
        self._drain()

    # -- worker side --------------------------------------------------------------------------

    def _work(self, job_id: int, job: JobFunction, cancel: CancelToken) -> None:
        ctx = JobContext(emit=lambda event: self._inbox.put((job_id, event)), cancel=cancel)
        try:
            run_recorded(self.store, job_id, job, ctx)
            finished = _Finished(JobState.SUCCEEDED, "")
        except JobCancelled as exc:
            running = self._running.get(job_id)
            if running is not None and running.quitting:
                self.store.finish(job_id, JobState.INTERRUPTED, QUIT_REASON)
                finished = _Finished(JobState.INTERRUPTED, QUIT_REASON)
            else:
                finished = _Finished(JobState.CANCELLED, str(exc))
        except MtpStudioError as exc:
            finished = _Finished(JobState.FAILED, str(exc))
        except Exception:  # already logged with its traceback by run_recorded
            finished = _Finished(JobState.FAILED, self.store.get(job_id).error)
        self._inbox.put((job_id, finished))

    # -- GUI side -----------------------------------------------------------------------------

    def _drain(self) -> None:
        batches: dict[int, list[JobEvent]] = {}
        finished: list[tuple[int, _Finished]] = []
        while True:
            try:
                job_id, item = self._inbox.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, _Finished):
                finished.append((job_id, item))
                continue
            batch = batches.setdefault(job_id, [])
            if isinstance(item, ProgressEvent) and batch and isinstance(batch[-1], ProgressEvent):
                batch[-1] = item  # only the latest progress matters to a display
            else:
                batch.append(item)
        for job_id, events in batches.items():
            self.job_events.emit(job_id, events)
        for job_id, outcome in finished:
            self._running.pop(job_id, None)
            self.job_finished.emit(job_id, outcome.state.value, in_window_words(outcome.message))
