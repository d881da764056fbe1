"""``bench decode`` whose worker dies by SIGILL exits non-zero with the advice (issue 31)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.runtime.illegal_instruction import (
    SIGILL,
    expected_advice,
    inference_worker_of,
    no_core_files,
)


def test_bench_decode_stops_with_the_advice_when_its_worker_dies_by_sigill(
    tiny_models: dict[str, Path],
) -> None:
    command = [sys.executable, "-m", "app", "bench", "decode", "--model", str(tiny_models["mtp"])]
    with no_core_files():
        bench = subprocess.Popen(
            [*command, "--depths", "1", "--repeats", "1", "--max-tokens", "64", "--threads", "1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.kill(inference_worker_of(bench.pid), SIGILL)
        _out, err = bench.communicate(timeout=120)
    assert bench.returncode == 2, err
    last = err.strip().splitlines()[-1]
    assert last.startswith(
        "mtp-studio: error: the llama.cpp worker was killed by SIGILL (an illegal instruction) "
        "while loading the model tiny-mtp.gguf: "
    )
    assert expected_advice() in last
