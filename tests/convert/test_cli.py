"""``mtp-studio convert`` as a user runs it: progress on stderr, the folder on the last line,
one clear line and status 2 when refused, and the job in the shared job history."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main
from app.engine.settings import app_dirs
from app.engine.store import JobState, JobStore
from tests.convert.conftest import BF16_DEMO, FP8_DEMO


def test_convert_prints_progress_and_the_folder_last(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "demo-bf16"
    assert main(["convert", str(FP8_DEMO), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0] == "converted to: BF16"
    assert lines[1] == "tensors: 124 (70 dequantised from FP8)"
    assert lines[-1] == f"output: {out}"
    assert captured.err.splitlines()[0] == f"dequantise: {FP8_DEMO}"
    assert "dequantise: 100%" in captured.err
    assert (out / "config.json").is_file()
    store = JobStore(app_dirs().job_database)
    try:
        job = store.jobs()[0]
    finally:
        store.close()
    assert job.spec.title == "Convert demo-mtp-fp8 to BF16"
    assert job.state is JobState.SUCCEEDED


def test_a_refused_conversion_is_one_line_with_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["convert", str(BF16_DEMO), "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"mtp-studio: error: {BF16_DEMO} has no quantised tensors")
    assert list(tmp_path.iterdir()) == []
