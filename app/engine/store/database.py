"""SQLite persistence for jobs, safe to share between threads and between app and CLI processes.

Why it looks the way it does:
- One connection guarded by a lock, so the worker threads that record events and the GUI thread
  that reads history never race; WAL mode so another process (a CLI download) can write while
  the app reads.
- Each process that runs jobs holds a lock file named after its session for as long as it lives.
  On open, a job still marked running whose session lock can be taken belonged to a process that
  died: it is marked interrupted and can be retried. (Process ids are not used: they are reused,
  and probing them on Windows kills the process.)
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from app.engine.credentials import mask_credentials
from app.engine.errors import MtpStudioError
from app.engine.jobs import JobEvent, LogEvent, ProgressEvent, ResultEvent, StageEvent
from app.engine.store.records import JobRecord, JobSpec, JobState, StoredEvent
from app.engine.store.sqlite_file import connect_private, is_locked, locked_message

log = logging.getLogger(__name__)

UNREADABLE_PARAMS = (
    "its stored parameters could not be read, so it cannot be retried; start it again"
)

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    title TEXT NOT NULL,
    params TEXT NOT NULL,
    state TEXT NOT NULL,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    stage TEXT NOT NULL DEFAULT '',
    done INTEGER NOT NULL DEFAULT 0,
    total INTEGER NOT NULL DEFAULT 0,
    unit TEXT NOT NULL DEFAULT 'B',
    error TEXT NOT NULL DEFAULT '',
    result TEXT,
    session TEXT NOT NULL,
    retry_of INTEGER REFERENCES jobs(id)
);
CREATE TABLE IF NOT EXISTS events (
    job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    text TEXT NOT NULL,
    level TEXT NOT NULL DEFAULT 'info',
    PRIMARY KEY (job_id, seq)
);
"""

_JOB_COLUMNS = (
    "id, kind, title, params, state, created_at, started_at, finished_at, stage, done, total, "
    "unit, error, result, retry_of"
)


class StoreError(MtpStudioError):
    """The job history database cannot be opened or written."""


class JobStore:
    """The job history of this user; open one per process (it owns the process's session)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.session = uuid.uuid4().hex
        sessions = path.parent / "sessions"
        try:
            sessions.mkdir(parents=True, exist_ok=True)
            self._session_lock = FileLock(sessions / f"{self.session}.lock")
            self._session_lock.acquire()
            self._db = connect_private(path)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{path}: job history version {version} is newer than this app understands; "
                    "update MTP Studio or move the file away to start a new history"
                )
            self._db.executescript(_SCHEMA)
            self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            self._db.commit()
        except sqlite3.DatabaseError as exc:
            if is_locked(exc):
                raise StoreError(locked_message(path, "job history")) from None
            raise StoreError(
                f"{path}: cannot open the job history ({exc}); "
                "move the file away to start a new history"
            ) from None
        self._lock = threading.Lock()
        self._sessions_dir = sessions
        self.interrupted_on_open = self._mark_dead_sessions_interrupted()

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """A transaction on the database; a lock held too long elsewhere is a StoreError."""
        try:
            with self._db:
                yield self._db
        except sqlite3.OperationalError as exc:
            if is_locked(exc):
                raise StoreError(locked_message(self.path, "job history")) from None
            raise

    def close(self) -> None:
        with self._lock:
            self._db.close()
        self._session_lock.release()
        (self._sessions_dir / f"{self.session}.lock").unlink(missing_ok=True)

    # -- writing ------------------------------------------------------------------------------

    def create(self, spec: JobSpec, retry_of: int | None = None) -> int:
        """Add a queued job owned by this process and return its id."""
        with self._lock, self._writing():
            cursor = self._db.execute(
                "INSERT INTO jobs (kind, title, params, state, created_at, session, retry_of) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    spec.kind,
                    spec.title,
                    mask_credentials(json.dumps(spec.params)),
                    JobState.QUEUED.value,
                    time.time(),
                    self.session,
                    retry_of,
                ),
            )
            return int(cursor.lastrowid or 0)

    def mark_running(self, job_id: int) -> None:
        with self._lock, self._writing():
            self._db.execute(
                "UPDATE jobs SET state=?, started_at=?, session=? WHERE id=?",
                (JobState.RUNNING.value, time.time(), self.session, job_id),
            )

    def record(self, job_id: int, event: JobEvent) -> None:
        """Persist one event: progress updates the job row, everything else is appended."""
        if isinstance(event, ProgressEvent):
            with self._lock, self._writing():
                self._db.execute(
                    "UPDATE jobs SET stage=?, done=?, total=?, unit=? WHERE id=?",
                    (event.stage, event.done, event.total, event.unit, job_id),
                )
            return
        if isinstance(event, StageEvent):
            text = f"{event.stage}: {event.detail}" if event.detail else event.stage
            self._append(job_id, "stage", text)
            with self._lock, self._writing():
                self._db.execute(
                    "UPDATE jobs SET stage=?, done=0, total=0 WHERE id=?", (event.stage, job_id)
                )
        elif isinstance(event, LogEvent):
            self._append(job_id, "log", event.message, event.level)
        elif isinstance(event, ResultEvent):
            self._append(job_id, "result", json.dumps(event.summary))
            with self._lock, self._writing():
                self._db.execute(
                    "UPDATE jobs SET result=? WHERE id=?", (json.dumps(event.summary), job_id)
                )

    def finish(self, job_id: int, state: JobState, error: str = "") -> None:
        """Record the final state; a failure's message is also appended to the job's log."""
        if error:
            self._append(job_id, "error", error, "error")
        with self._lock, self._writing():
            self._db.execute(
                "UPDATE jobs SET state=?, finished_at=?, error=? WHERE id=?",
                (state.value, time.time(), mask_credentials(error), job_id),
            )

    def _append(self, job_id: int, kind: str, text: str, level: str = "info") -> None:
        with self._lock, self._writing():
            self._db.execute(
                "INSERT INTO events (job_id, seq, at, kind, text, level) VALUES "
                "(?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE job_id=?), ?, ?, ?, ?)",
                (job_id, job_id, time.time(), kind, mask_credentials(text), level),
            )

    def _mark_dead_sessions_interrupted(self) -> list[int]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id, session FROM jobs WHERE state IN (?, ?) AND session != ?",
                (JobState.RUNNING.value, JobState.QUEUED.value, self.session),
            ).fetchall()
        dead = {session for _, session in rows if not self._session_alive(session)}
        interrupted = [job_id for job_id, session in rows if session in dead]
        for job_id in interrupted:
            self.finish(
                job_id,
                JobState.INTERRUPTED,
                "the app stopped while this job was running; retry it to continue",
            )
        return interrupted

    def _session_alive(self, session: str) -> bool:
        lock_path = self._sessions_dir / f"{session}.lock"
        if not lock_path.exists():
            return False
        probe = FileLock(lock_path)
        try:
            probe.acquire(timeout=0)
        except Timeout:
            return True
        probe.release()
        lock_path.unlink(missing_ok=True)
        return False

    # -- reading ------------------------------------------------------------------------------

    def get(self, job_id: int) -> JobRecord:
        with self._lock:
            row = self._db.execute(
                f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id=?", (job_id,)
            ).fetchone()
        if row is None:
            raise StoreError(f"job {job_id} is not in the history at {self.path}")
        return _to_record(row)

    def jobs(self, limit: int = 500) -> list[JobRecord]:
        """The most recent jobs first."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_JOB_COLUMNS} FROM jobs ORDER BY id DESC LIMIT ?", (limit,)
            ).fetchall()
        return [_to_record(row) for row in rows]

    def events(self, job_id: int, after_seq: int = 0) -> list[StoredEvent]:
        """The job's stages, log lines, result and error, oldest first (after ``after_seq``)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT job_id, seq, at, kind, text, level FROM events "
                "WHERE job_id=? AND seq>? ORDER BY seq",
                (job_id, after_seq),
            ).fetchall()
        return [StoredEvent(*row) for row in rows]


def _to_record(row: tuple[Any, ...]) -> JobRecord:
    (job_id, kind, title, params, state, created, started, finished, stage, done, total, unit) = (
        row[:12]
    )
    error, result, retry_of = row[12:]
    try:
        stored_params = json.loads(params)
    except ValueError:  # a row written by a faulty build: show the job, never fail the history
        log.warning(
            "job %s: its stored parameters are not valid JSON; it cannot be retried", job_id
        )
        stored_params = {}
        error = f"{error}; {UNREADABLE_PARAMS}" if error else UNREADABLE_PARAMS
    try:
        stored_result = json.loads(result) if result else None
    except ValueError:
        log.warning("job %s: its stored result is not valid JSON", job_id)
        stored_result = None
    return JobRecord(
        job_id=job_id,
        spec=JobSpec(kind, title, stored_params),
        state=JobState(state),
        created_at=created,
        started_at=started,
        finished_at=finished,
        stage=stage,
        done=done,
        total=total,
        unit=unit,
        error=error,
        result=stored_result,
        retry_of=retry_of,
    )
