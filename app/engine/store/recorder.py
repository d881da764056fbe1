"""Runs a job while persisting what it reports, so CLI and GUI record history the same way.

The job's own events still reach the front end's sink; the store sees them first, so a crash
right after an event still leaves it in the history. The outcome (succeeded, failed with the
readable message, cancelled) is recorded, then the exception is re-raised for the caller.
Unexpected exceptions are bugs: their traceback goes to the log, never into the history text.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from app.engine.errors import JobCancelled, MtpStudioError
from app.engine.jobs import JobContext, JobEvent
from app.engine.store.database import JobStore
from app.engine.store.records import JobState

log = logging.getLogger(__name__)


def run_recorded(
    store: JobStore, job_id: int, job: Callable[[JobContext], object], ctx: JobContext
) -> object:
    """Run ``job`` under ``ctx``, recording events and outcome of ``job_id`` in ``store``."""
    forward = ctx.emit

    def record_then_forward(event: JobEvent) -> None:
        store.record(job_id, event)
        forward(event)

    recorded = JobContext(emit=record_then_forward, cancel=ctx.cancel)
    store.mark_running(job_id)
    try:
        outcome = job(recorded)
    except JobCancelled as exc:
        store.finish(job_id, JobState.CANCELLED, str(exc))
        raise
    except MtpStudioError as exc:
        store.finish(job_id, JobState.FAILED, str(exc))
        raise
    except Exception as exc:
        log.exception("job %d crashed", job_id)
        store.finish(
            job_id,
            JobState.FAILED,
            f"internal error ({type(exc).__name__}: {exc}); the log has the details — "
            "please report it",
        )
        raise
    store.finish(job_id, JobState.SUCCEEDED)
    return outcome
