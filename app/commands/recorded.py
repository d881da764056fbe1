"""Runs a CLI job through the same job history as the GUI.

A download or publish started from the terminal appears in the app's job monitor, and one cut
short with Ctrl-C is marked interrupted there so it can be retried — the same bookkeeping for
every command, kept in one place.
"""

from __future__ import annotations

from collections.abc import Callable

from app.engine.jobs import EventSink, JobContext
from app.engine.settings import app_dirs
from app.engine.store import JobSpec, JobState, JobStore, run_recorded


def run_recorded_command(
    spec: JobSpec,
    job: Callable[[JobContext], object],
    emit: EventSink,
    interrupted_message: str,
) -> object:
    """Record ``spec`` in the job history, run ``job`` reporting to ``emit``; return its result."""
    dirs = app_dirs()
    dirs.data.mkdir(parents=True, exist_ok=True)
    store = JobStore(dirs.job_database)
    try:
        job_id = store.create(spec)
        try:
            return run_recorded(store, job_id, job, JobContext(emit=emit))
        except KeyboardInterrupt:
            store.finish(job_id, JobState.INTERRUPTED, interrupted_message)
            raise
    finally:
        store.close()
