"""``mtp-studio graft`` as a user runs it: a summary on stdout, progress on stderr, the job in the
app's history, and a refusal as one readable line with exit status 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine.errors import GraftError
from app.engine.jobs import JobContext
from app.engine.runtime.backends.gguf_info import read_gguf_summary
from app.engine.settings import app_dirs
from app.engine.store import JobState, JobStore
from app.engine.store.kinds import build_job
from tests.graft.bases import DEMO_GGUF
from tests.store.isolation import IsolatedHome

ROOT = Path(__file__).resolve().parents[2]


def cli(home: IsolatedHome, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MTP_STUDIO_HOME": str(home.root / "mtp-studio"), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "app", "graft", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def recorded_jobs() -> list:
    store = JobStore(app_dirs().job_database)
    try:
        return store.jobs()
    finally:
        store.close()


def test_graft_prints_a_summary_and_records_the_job(
    graft_files: dict[str, Path], home: IsolatedHome, tmp_path: Path
) -> None:
    out = tmp_path / "model-mtp.gguf"
    done = cli(
        home,
        "--base",
        str(graft_files["trunk_q4"]),
        "--sidecar",
        str(graft_files["sidecar_fp8"]),
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "architecture: qwen35",
        "blocks: 8 trunk + 1 MTP",
        "head: 15 tensors, 1.1 MB as q8_0, norms offset",
        f"bytes written: {out.stat().st_size / 1e6:.1f} MB ({out.stat().st_size} B)",
        done.stdout.splitlines()[4],
        f"output: {out}",
    ]
    assert done.stdout.splitlines()[4].startswith("seconds: ")
    assert (
        done.stderr.splitlines()[0]
        == f"check: {graft_files['trunk_q4'].name} + sidecar_fp8.safetensors"
    )
    assert "write: 100%" in done.stderr
    summary = read_gguf_summary(out)
    assert (summary.nextn_layers, summary.block_count, summary.mtp_unavailable_reason) == (
        1,
        9,
        None,
    )
    [record] = recorded_jobs()
    assert (record.spec.kind, record.state) == ("graft", JobState.SUCCEEDED)
    assert record.spec.params["out"] == str(out) and record.spec.params["head_type"] == "q8_0"
    assert record.result is not None and record.result["bytes_written"] == out.stat().st_size
    first = out.read_bytes()
    out.unlink()
    build_job(record.spec)(JobContext())  # the monitor's "retry" writes the same file again
    assert out.read_bytes() == first


def test_graft_json_and_head_type(
    graft_files: dict[str, Path], home: IsolatedHome, tmp_path: Path
) -> None:
    out = tmp_path / "model-f16-head.gguf"
    done = cli(
        home,
        "--base",
        str(graft_files["trunk_q8"]),
        "--sidecar",
        str(graft_files["sidecar_fp8"]),
        "--out",
        str(out),
        "--head-type",
        "f16",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["head_type"] == "f16" and summary["output"] == str(out)
    assert summary["bytes_written"] == out.stat().st_size
    assert summary["head_bytes"] == 2 * (
        256 * 512 + 512 * 256 + 2 * 128 * 256 + 256 * 256 + 3 * 768 * 256
    ) + 4 * (5 * 256 + 2 * 64)


def test_a_refused_graft_is_one_line_exit_2_and_a_failed_job(
    graft_files: dict[str, Path], home: IsolatedHome, tmp_path: Path
) -> None:
    out = tmp_path / "again.gguf"
    done = cli(
        home,
        "--base",
        str(DEMO_GGUF),
        "--sidecar",
        str(graft_files["sidecar_fp8"]),
        "--out",
        str(out),
    )
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        "mtp-studio: error: demo-mtp.gguf already has 1 MTP block(s) "
        "(qwen35.nextn_predict_layers = 1); pass --replace (replace=True) to swap in the "
        "sidecar's head"
    )
    assert "Traceback" not in done.stderr and not out.exists()
    [record] = recorded_jobs()
    assert record.state == JobState.FAILED and "already has 1 MTP block" in record.error
    with pytest.raises(GraftError, match="already has 1 MTP block"):
        build_job(record.spec)(JobContext())  # a retry of the same request is refused the same
    replaced = cli(
        home,
        "--base",
        str(DEMO_GGUF),
        "--sidecar",
        str(graft_files["sidecar_fp8"]),
        "--out",
        str(out),
        "--replace",
    )
    assert replaced.returncode == 0, replaced.stderr
    assert "blocks: 8 trunk + 1 MTP (replaced 1)" in replaced.stdout
