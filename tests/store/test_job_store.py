"""The job history: what the monitor shows after a restart, and jobs cut short by a dead app."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from app.engine.download import DownloadJob, DownloadRequest
from app.engine.errors import DownloadError, JobCancelled, MtpStudioError
from app.engine.jobs import JobContext, LogEvent, ProgressEvent, ResultEvent, StageEvent
from app.engine.store import JobSpec, JobState, JobStore, run_recorded
from app.engine.store.kinds import build_job


def test_history_and_events_survive_reopening(tmp_path: Path) -> None:
    database = tmp_path / "jobs.sqlite3"
    store = JobStore(database)
    job_id = store.create(JobSpec("download", "Download a/b", {"repo_id": "a/b"}))

    def job(ctx: JobContext) -> None:
        ctx.stage("download", "model.safetensors")
        ctx.log("resuming: 1.0 MB already downloaded")
        ctx.emit(ProgressEvent("download", 500, 1000))
        ctx.emit(ResultEvent({"files": 2}))

    seen = []
    run_recorded(store, job_id, job, JobContext(emit=seen.append))
    store.close()

    reopened = JobStore(database)
    record = reopened.get(job_id)
    assert record.state is JobState.SUCCEEDED
    assert record.spec == JobSpec("download", "Download a/b", {"repo_id": "a/b"})
    assert (record.stage, record.done, record.total) == ("download", 500, 1000)
    assert record.result == {"files": 2}
    assert record.started_at is not None and record.finished_at is not None
    texts = [(event.kind, event.text) for event in reopened.events(job_id)]
    assert texts == [
        ("stage", "download: model.safetensors"),
        ("log", "resuming: 1.0 MB already downloaded"),
        ("result", '{"files": 2}'),
    ]
    assert [type(event) for event in seen] == [StageEvent, LogEvent, ProgressEvent, ResultEvent]
    reopened.close()


@pytest.mark.parametrize(
    ("raised", "state", "message"),
    [
        (DownloadError("not enough free disk space; free some"), JobState.FAILED, "not enough"),
        (JobCancelled("cancelled by the user"), JobState.CANCELLED, "cancelled by the user"),
        (ZeroDivisionError("division by zero"), JobState.FAILED, "internal error"),
    ],
)
def test_outcome_is_recorded_and_the_error_re_raised(
    tmp_path: Path, raised: Exception, state: JobState, message: str
) -> None:
    store = JobStore(tmp_path / "jobs.sqlite3")
    job_id = store.create(JobSpec("download", "x", {}))

    def job(_ctx: JobContext) -> None:
        raise raised

    with pytest.raises(type(raised)):
        run_recorded(store, job_id, job, JobContext())
    record = store.get(job_id)
    assert record.state is state
    assert message in record.error
    assert "Traceback" not in record.error
    assert store.events(job_id)[-1].kind == "error"
    assert record.state.retryable
    store.close()


def test_newest_jobs_come_first_and_retries_point_at_their_original(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "jobs.sqlite3")
    first = store.create(JobSpec("download", "first", {}))
    second = store.create(JobSpec("download", "first", {}), retry_of=first)
    assert [record.job_id for record in store.jobs()] == [second, first]
    assert store.get(second).retry_of == first
    with pytest.raises(MtpStudioError, match="job 999 is not in the history"):
        store.get(999)
    store.close()


def test_a_row_with_unreadable_parameters_is_listed_not_fatal(tmp_path: Path) -> None:
    """A history row written by a faulty build (here: params cut mid-string) must not stop the
    history, and so the app, from opening; the job shows with the reason it cannot be retried."""
    import sqlite3

    path = tmp_path / "jobs.sqlite3"
    store = JobStore(path)
    good = store.create(JobSpec("download", "good", {"repo_id": "org/repo"}))
    bad = store.create(JobSpec("download", "bad", {"repo_id": "org/repo"}))
    store.close()
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE jobs SET params=? WHERE id=?", ('{"endpoint": "http://x?token=*** "', bad)
        )
    reopened = JobStore(path)
    records = {record.job_id: record for record in reopened.jobs()}
    assert records[good].spec.params == {"repo_id": "org/repo"}
    assert records[bad].spec.params == {}
    assert "cannot be retried" in (records[bad].error or "")
    reopened.close()


_DIE_WHILE_RUNNING = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from app.engine.store import JobSpec, JobStore
    store = JobStore(Path(sys.argv[1]))
    job_id = store.create(JobSpec("download", "killed mid-way", {}))
    store.mark_running(job_id)
    print(job_id, flush=True)
    os._exit(9)
    """
)


def test_a_job_of_a_process_that_died_is_marked_interrupted(tmp_path: Path) -> None:
    database = tmp_path / "jobs.sqlite3"
    live = JobStore(database)
    live_job = live.create(JobSpec("download", "still running here", {}))
    live.mark_running(live_job)

    died = subprocess.run(
        [sys.executable, "-c", _DIE_WHILE_RUNNING, str(database)],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert died.returncode == 9, died.stderr
    dead_job = int(died.stdout)

    restarted = JobStore(database)
    assert restarted.interrupted_on_open == [dead_job]
    record = restarted.get(dead_job)
    assert record.state is JobState.INTERRUPTED
    assert record.error == "the app stopped while this job was running; retry it to continue"
    assert record.state.retryable
    assert restarted.get(live_job).state is JobState.RUNNING
    restarted.close()
    live.close()


def test_a_stored_download_can_be_rebuilt_for_retry(tmp_path: Path) -> None:
    request = DownloadRequest(
        repo_id="owner/model",
        destination=str(tmp_path / "cache"),
        endpoint="http://127.0.0.1:1",
        include=("*.json", "mtp.safetensors"),
    )
    store = JobStore(tmp_path / "jobs.sqlite3")
    job_id = store.create(JobSpec("download", request.title, request.to_params()))
    store.close()
    reopened = JobStore(tmp_path / "jobs.sqlite3")
    rebuilt = build_job(reopened.get(job_id).spec)
    reopened.close()
    assert isinstance(rebuilt, DownloadJob)
    assert rebuilt.request == request
    with pytest.raises(MtpStudioError, match="job kind 'teleport' cannot be run"):
        build_job(JobSpec("teleport", "?", {}))
