"""The paired-bootstrap interval of the decode benchmark's default / best-fixed ratio."""

from __future__ import annotations

import numpy as np
import pytest

from app.engine.runtime.bench.interval import to_best_interval


def test_a_mode_half_as_fast_on_every_prompt_has_no_spread() -> None:
    baseline = [(100, 1.0), (40, 0.5), (128, 2.0)]
    half = [(tokens, seconds * 2) for tokens, seconds in baseline]
    interval = to_best_interval(half, [baseline])
    assert interval.low == pytest.approx(0.5) and interval.high == pytest.approx(0.5)


def test_the_interval_covers_the_truth_and_narrows_with_more_prompts() -> None:
    """Requests whose speed varies ±15 % with their text: a mode truly 0.97× the baseline gets
    an interval around 0.97 that a dozen requests cannot tell from 0.98, and hundreds can."""
    rng = np.random.default_rng(1)

    def noisy(count: int, speed: float) -> list[tuple[int, float]]:
        tokens = rng.integers(20, 129, count)
        return [(int(n), n / (speed * rng.normal(1.0, 0.15))) for n in tokens]

    few = to_best_interval(noisy(12, 0.97), [noisy(12, 1.0)])
    many = to_best_interval(noisy(600, 0.97), [noisy(600, 1.0)])
    assert few.low < 0.97 < few.high and few.high > 0.98
    assert many.low < 0.97 < many.high and many.high < 0.98
    assert many.high - many.low < (few.high - few.low) / 4


def test_the_best_baseline_is_chosen_in_each_resample() -> None:
    slow = [(100, 2.0)] * 5
    fast = [(100, 1.0)] * 5
    interval = to_best_interval(fast, [slow, fast])
    assert interval.low == pytest.approx(1.0) and interval.high == pytest.approx(1.0)


def test_modes_must_have_a_request_on_every_prompt() -> None:
    with pytest.raises(ValueError, match="one request per prompt"):
        to_best_interval([(1, 1.0)], [[(1, 1.0), (2, 1.0)]])
