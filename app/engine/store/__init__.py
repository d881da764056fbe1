"""The job history: every job (publish, download, extraction, benchmark) and its outcome, in SQLite.

The monitor shows history after a restart and offers "retry" for failed or interrupted jobs, so
what a job *was* (its kind and parameters) is stored alongside what *happened* (events, outcome).
"""

from app.engine.store.database import JobStore
from app.engine.store.recorder import run_recorded
from app.engine.store.records import JobRecord, JobSpec, JobState, StoredEvent

__all__ = ["JobRecord", "JobSpec", "JobState", "JobStore", "StoredEvent", "run_recorded"]
