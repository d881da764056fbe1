"""Issue 34: a positive temperature too small to divide by (1e-320 overflows the logits to
infinity, the distribution to NaN) is refused in one line, in ``chat --temp`` as in the sampler;
0 (greedy) and 0.001 still sample."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.sampling.sampler import MIN_TEMPERATURE, SamplerSettings, distribution

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("temperature", [1e-320, 5e-324, 1e-9, float("inf"), -1.0])
def test_the_sampler_refuses_temperatures_it_cannot_divide_by(temperature: float) -> None:
    with pytest.raises(RuntimeBackendError, match="use 0 \\(greedy\\) or a value of at least"):
        SamplerSettings(temperature=temperature)


def test_the_smallest_temperature_still_gives_a_distribution() -> None:
    logits = np.array([1.0, 1.0005, -3.0], dtype=np.float32)
    probabilities = distribution(logits, SamplerSettings(temperature=MIN_TEMPERATURE))
    assert np.isfinite(probabilities).all() and probabilities.sum() == pytest.approx(1.0)
    assert probabilities[1] > probabilities[0] > probabilities[2]


def test_chat_temp_1e_320_is_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app", "chat", "--temp", "1e-320", "--prompt", "Hi"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "mtp-studio: error: temperature 1e-320 is invalid: use 0 (greedy) or a value of at least "
        "0.001"
    )
