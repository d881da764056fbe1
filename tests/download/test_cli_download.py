"""``mtp-studio download`` as a user runs it: a real process, the local hub, and a kill -9
in the middle — after which the history says "interrupted" and a retry resumes from the byte
reached."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.engine.jobs import JobContext
from app.engine.settings import app_dirs
from app.engine.store import JobState, JobStore, run_recorded
from app.engine.store.kinds import build_job
from tests.localhub import LocalHub
from tests.store.isolation import IsolatedHome

REPO = "acme/tiny-mtp-model"
ROOT = Path(__file__).resolve().parents[2]
WEIGHTS = os.urandom(4_000_000)
HEADS = os.urandom(600_000)


@pytest.fixture
def repo(local_hub: LocalHub) -> str:
    return local_hub.seed_files(REPO, {"model.safetensors": WEIGHTS, "mtp.safetensors": HEADS})


def cli(home: IsolatedHome, *args: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "MTP_STUDIO_HOME": str(home.root / "mtp-studio"),
        "HF_HUB_CACHE": str(home.hub_cache),
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "app", "download", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_download_prints_where_the_files_are_and_records_the_job(
    local_hub: LocalHub, repo: str, home: IsolatedHome
) -> None:
    process = cli(home, REPO, "--include", "mtp.safetensors")
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    location = Path(out.strip())
    assert location == home.hub_cache / "models--acme--tiny-mtp-model" / "snapshots" / repo
    assert (location / "mtp.safetensors").read_bytes() == HEADS
    assert "download: 100% (600.0 kB / 600.0 kB)" in err
    store = JobStore(app_dirs().job_database)
    [record] = store.jobs()
    assert (record.spec.kind, record.state) == ("download", JobState.SUCCEEDED)
    assert record.spec.title == f"Download {REPO} (mtp.safetensors)"
    store.close()


def test_a_bad_repo_is_one_readable_line(local_hub: LocalHub, home: IsolatedHome) -> None:
    process = cli(home, "acme/nothing-here")
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 2
    assert err.strip().splitlines()[-1] == (
        f"mtp-studio: error: acme/nothing-here on {local_hub.endpoint} does not exist or needs "
        "a token; check the name, or sign in (Settings) if it is private"
    )
    assert "Traceback" not in err


def test_killed_mid_download_then_retried_resumes_from_the_byte_reached(
    local_hub: LocalHub, repo: str, home: IsolatedHome
) -> None:
    # Every attempt is cut after 1 MB, so the process sits in its retry wait with bytes on disk.
    local_hub.faults.drop_download(match="model.safetensors", after_bytes=1_000_000, times=None)
    process = cli(home, REPO, "--include", "model.safetensors")
    blobs = home.hub_cache / "models--acme--tiny-mtp-model" / "blobs"
    deadline = time.monotonic() + 30
    while not any(r.dropped for r in local_hub.traffic.requests("GET")):
        assert time.monotonic() < deadline and process.poll() is None, process.stderr
        time.sleep(0.02)
    time.sleep(0.3)  # the first retry waits 1 s: kill it while it waits
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    [partial] = list(blobs.glob("*.incomplete"))
    kept = partial.stat().st_size
    assert 0 < kept <= 1_000_000

    local_hub.faults.clear()
    store = JobStore(app_dirs().job_database)
    [killed] = store.jobs()
    assert killed.state is JobState.INTERRUPTED
    assert killed.job_id in store.interrupted_on_open
    retry_id = store.create(killed.spec, retry_of=killed.job_id)
    run_recorded(store, retry_id, build_job(killed.spec), JobContext())
    assert store.get(retry_id).state is JobState.SUCCEEDED
    store.close()

    snapshot = home.hub_cache / "models--acme--tiny-mtp-model" / "snapshots" / repo
    assert (snapshot / "model.safetensors").read_bytes() == WEIGHTS
    # the bodies served, in the order they ended (the API origin's 302 to the storage origin may
    # be recorded after the body it pointed to when the machine is busy)
    bodies = local_hub.traffic.requests("GET")
    last = [r for r in bodies if r.file_path == "model.safetensors" and r.status != 302][-1]
    assert last.byte_range == f"bytes={kept}-"
    assert last.bytes_sent == len(WEIGHTS) - kept
