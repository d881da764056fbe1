"""Issue 23: SIGTERM during an extraction leaves no temporary file behind (it used to).

The real CLI extracts a synthetic FP8 checkpoint in a child process; once it reports some
progress (1 to 99 %), it gets SIGTERM. It must exit 143 with one line, and the output folder
must hold neither the sidecar nor a ``.partial`` file.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from app.engine.mtp.synthetic import generate_fp8_checkpoint

ROOT = Path(__file__).resolve().parents[2]


def test_sigterm_mid_extraction_removes_the_temporary_file(tmp_path: Path) -> None:
    source = tmp_path / "ckpt"
    generate_fp8_checkpoint(source, mtp_fp8_bytes=20_000_000, trunk_bytes=1_000_000, hidden=2048)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "mtp.safetensors"
    child = subprocess.Popen(
        [sys.executable, "-m", "app", "extract", "--source", str(source), "--out", str(out)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stderr is not None
    for line in child.stderr:  # progress goes to stderr
        if re.match(r"extract: [1-9][0-9]?% ", line):
            assert [p.suffix for p in out_dir.iterdir()] == [".partial"]
            child.send_signal(signal.SIGTERM)
            break
    _out, err = child.communicate(timeout=60)
    assert child.returncode == 143, err
    assert err.strip().splitlines()[-1] == "mtp-studio: terminated"
    assert list(out_dir.iterdir()) == []
