"""The shapes the job store hands out: what a job is, what state it is in, what it reported.

Kept apart from the SQLite code so front ends can type against them without touching the database.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class JobState(StrEnum):
    """Lifecycle of a job; the last four are final."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"

    @property
    def final(self) -> bool:
        return self not in (JobState.QUEUED, JobState.RUNNING)

    @property
    def retryable(self) -> bool:
        return self in (JobState.FAILED, JobState.CANCELLED, JobState.INTERRUPTED)


@dataclass(frozen=True)
class JobSpec:
    """What is needed to run (or re-run) a job: its kind, a title for people, JSON parameters.

    Parameters never hold a token: jobs resolve it when they run.
    """

    kind: str
    title: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JobRecord:
    """One row of the history, as the monitor shows it."""

    job_id: int
    spec: JobSpec
    state: JobState
    created_at: float
    started_at: float | None
    finished_at: float | None
    stage: str
    done: int
    total: int
    unit: str
    error: str
    result: dict[str, Any] | None
    retry_of: int | None


@dataclass(frozen=True)
class StoredEvent:
    """A persisted stage, log line, result or error of a job (progress is kept on the job row)."""

    job_id: int
    seq: int
    at: float
    kind: str  # "stage", "log", "result" or "error"
    text: str
    level: str = "info"
