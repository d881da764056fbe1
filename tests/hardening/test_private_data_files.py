"""Issue 23: the histories and the log are private (0600), and a locked database names its holder.

Real SQLite files and a real second process: the job and chat histories and the log file were
created world-readable, and a database another process kept locked past the busy timeout was a
raw ``sqlite3.OperationalError`` (or, at start-up, advice to move the history away).
"""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine.chat.conversation import ChatSettings
from app.engine.chat.history import HistoryError, HistoryStore
from app.engine.store import sqlite_file
from app.engine.store.database import JobStore, StoreError
from app.engine.store.records import JobSpec
from app.ui.logsetup import configure_logging

HOLD_LOCK = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(60)
"""


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_job_history_files_are_private(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite3"
    store = JobStore(path)
    store.create(JobSpec("extract", "a job", {"source": "org/model"}))
    companions = [p for p in tmp_path.iterdir() if p.name.startswith("jobs.sqlite3")]
    assert {p.name for p in companions} >= {"jobs.sqlite3", "jobs.sqlite3-wal"}
    assert all(_mode(p) == 0o600 for p in companions), [(p.name, oct(_mode(p))) for p in companions]
    store.close()


def test_chat_history_files_are_private_and_an_old_open_one_is_narrowed(tmp_path: Path) -> None:
    path = tmp_path / "chat.sqlite3"
    HistoryStore(path).close()
    os.chmod(path, 0o644)
    store = HistoryStore(path)
    store.create_conversation("secret plans", ChatSettings())
    assert all(_mode(p) == 0o600 for p in tmp_path.glob("chat.sqlite3*"))
    store.close()


def test_the_log_file_is_private(tmp_path: Path) -> None:
    path = configure_logging(tmp_path / "logs")
    logging.getLogger("test").warning("something")
    assert _mode(path) == 0o600


@pytest.fixture
def held_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(sqlite_file, "BUSY_TIMEOUT_SECONDS", 1)
    path = tmp_path / "jobs.sqlite3"
    JobStore(path).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    yield path, holder.pid
    holder.kill()
    holder.wait()


@pytest.mark.slow
def test_a_locked_job_history_names_the_process_holding_it(held_lock) -> None:
    path, pid = held_lock
    with pytest.raises(StoreError) as caught:
        JobStore(path)
    message = str(caught.value)
    assert f"locked by process {pid} (python" in message
    assert "close that program" in message and "move the file away" not in message


@pytest.mark.slow
def test_a_locked_chat_history_names_the_process_holding_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_file, "BUSY_TIMEOUT_SECONDS", 1)
    path = tmp_path / "chat.sqlite3"
    HistoryStore(path).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(HistoryError, match=rf"locked by process {holder.pid} \(python"):
            HistoryStore(path)
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
def test_a_write_to_a_job_history_locked_meanwhile_names_the_holder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_file, "BUSY_TIMEOUT_SECONDS", 1)
    path = tmp_path / "jobs.sqlite3"
    store = JobStore(path)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(StoreError, match=rf"locked by process {holder.pid} \(python"):
            store.create(JobSpec("extract", "a job", {}))
    finally:
        holder.kill()
        holder.wait()
        store.close()
