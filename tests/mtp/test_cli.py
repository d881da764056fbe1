"""``mtp-studio extract`` and ``mtp-studio bench extract`` as a user runs them."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import safetensors

from app.cli import main
from tests.mtp.checkpoints import SyntheticCheckpoint

REPO = Path(__file__).resolve().parents[2]


def test_extract_prints_a_summary_and_progress(
    checkpoints: dict[str, SyntheticCheckpoint], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    checkpoint = checkpoints["deepseek-v3-two-nextn-text-config"]
    out = tmp_path / "mtp.safetensors"
    assert main(["extract", "--source", str(checkpoint.folder), "--out", str(out)]) == 0

    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0] == "layout: deepseek-nextn (layers 3, 4)"
    assert lines[1] == "family: deepseek_v3"
    assert lines[2] == f"tensors: {len(checkpoint.mtp_names)}"
    assert lines[3].startswith("bytes read: ") and f"{checkpoint.bytes_needed} B needed" in lines[3]
    assert lines[4] == f"bytes written: {_mb(out.stat().st_size)} ({out.stat().st_size} B)"
    assert lines[5].startswith("seconds: ")
    assert lines[6] == f"sha256: {hashlib.sha256(out.read_bytes()).hexdigest()}"
    assert lines[7] == f"output: {out}"
    assert captured.err.splitlines()[0] == f"detect: {checkpoint.folder}"
    assert "extract: 100%" in captured.err
    assert sorted(dict(safetensors.deserialize(out.read_bytes()))) == list(checkpoint.mtp_names)


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def test_extract_json_is_one_object(
    checkpoints: dict[str, SyntheticCheckpoint], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    checkpoint = checkpoints["qwen35-bf16"]
    out = tmp_path / "mtp.safetensors"
    assert main(["extract", "--source", str(checkpoint.folder), "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["layout"] == "qwen-mtp"
    assert summary["layer_indices"] == [0]
    assert summary["tensor_count"] == 15
    assert summary["bytes_written"] == out.stat().st_size
    assert summary["bytes_read"] == summary["bytes_needed"] == checkpoint.bytes_needed
    assert summary["out_path"] == str(out)
    assert summary["seconds"] > 0
    assert set(summary) == {
        "out_path",
        "layout",
        "family",
        "layer_indices",
        "missing_layers",
        "tensor_count",
        "bytes_needed",
        "bytes_read",
        "bytes_written",
        "sha256",
        "seconds",
    }


def test_extract_failure_exits_2_with_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    (tmp_path / "README.md").write_text("not a model")
    out = tmp_path / "mtp.safetensors"
    assert main(["extract", "--source", str(tmp_path), "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"mtp-studio: error: {tmp_path} is not a safetensors checkpoint")
    assert not out.exists()


@pytest.mark.slow
def test_bench_extract_runs_end_to_end_and_cleans_up(tmp_path: Path) -> None:
    """A small run of the real benchmark (full size: `mtp-studio bench extract`, see README)."""
    sizes = ["--mtp-gb", "0.004", "--trunk-gb", "0.001", "--hidden", "256"]
    result = subprocess.run(
        [sys.executable, "-m", "app", "bench", "extract", *sizes, "--dir", str(tmp_path), "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    figures = json.loads(result.stdout)
    assert figures["mtp_fp8_bytes"] >= 4_000_000
    assert figures["bytes_needed"] <= figures["bytes_read"] <= 1.05 * figures["bytes_needed"]
    assert figures["read_ok"] is True
    assert figures["floor_seconds"] > 0 and figures["extract_seconds"] > 0
    assert figures["floor_cpu_seconds"] > 0 and figures["extract_cpu_seconds"] > 0
    assert figures["ratio"] == pytest.approx(figures["extract_seconds"] / figures["floor_seconds"])
    assert 0 < figures["baseline_rss"] < figures["extract_rss"]
    assert figures["rss_above_baseline"] < 300_000_000
    assert list(tmp_path.iterdir()) == [], "the benchmark must delete its temporary checkpoint"
    for stage in ("generate", "floor", "extract"):
        assert f"{stage}:" in result.stderr
