"""Issue 23: a secret inside HF_ENDPOINT is masked wherever the endpoint is printed or stored.

The CLI runs for real against an endpoint where nothing listens (its error names the endpoint),
the job history is a real SQLite file read back, and the log is the app's real log handler.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine.credentials import mask_credentials
from app.engine.store.database import JobStore
from app.engine.store.records import JobSpec, JobState
from app.ui.logsetup import configure_logging

ROOT = Path(__file__).resolve().parents[2]
ENDPOINT = "http://mirror-user:S3cretPass@127.0.0.1:9/hub?token=S3cretQuery"


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("https://u:p@host/x", "https://***@host/x"),
        ("see http://tok@host:8080/a?b=1", "see http://***@host:8080/a?b=1"),
        ("https://host/x?token=abc&q=1", "https://host/x?token=***&q=1"),
        ("https://host/x?a=1&access_token=abc", "https://host/x?a=1&access_token=***"),
        ("token hf_abcdefghijkl here", "token hf_… here"),
        ("https://host/plain", "https://host/plain"),
        ("user@example.com wrote", "user@example.com wrote"),
    ],
)
def test_credentials_are_masked(text: str, masked: str) -> None:
    assert mask_credentials(text) == masked


def test_the_cli_error_does_not_print_the_endpoint_secret(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "HF_ENDPOINT": ENDPOINT,
        "HF_HOME": str(tmp_path / "hf"),
        "MTP_STUDIO_HOME": str(tmp_path / "home"),
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-m", "app", "download", "org/repo"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "127.0.0.1:9" in done.stderr, done.stderr
    assert "S3cret" not in done.stderr + done.stdout


def test_the_job_history_stores_no_endpoint_secret(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite3"
    store = JobStore(path)
    job = store.create(JobSpec("publish", "publish x", {"endpoint": ENDPOINT}))
    store.finish(job, JobState.FAILED, f"could not reach {ENDPOINT}")
    store.close()
    assert b"S3cret" not in b"".join(p.read_bytes() for p in tmp_path.glob("jobs.sqlite3*"))
    reopened = JobStore(path)
    assert reopened.get(job).spec.params["endpoint"].startswith("http://***@127.0.0.1:9")
    reopened.close()


def test_the_log_file_holds_no_endpoint_secret(tmp_path: Path) -> None:
    path = configure_logging(tmp_path / "logs")
    logging.getLogger("test").error("checking %s failed", ENDPOINT)
    for handler in logging.getLogger().handlers:
        handler.flush()
    text = path.read_text()
    assert "checking http://***@127.0.0.1:9/hub?token=*** failed" in text
    assert "S3cret" not in text
