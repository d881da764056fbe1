"""How far a decode benchmark's "default / best fixed depth" figure could move: a paired bootstrap.

On a CPU, one request's speed varies ±10–15 % with its text (sampled replies differ in length
and in how many drafts are kept) and with short slow moments of the machine, so a row of a
dozen requests is only good to a few per cent, and max(plain, best fixed depth) picks the
luckiest of several such rows. A ratio printed alone cannot say whether 0.96 missed 0.98 or
measured it. Resampling the benchmark's prompt × repeat pairs with replacement, every mode's
requests on the same prompt and seed moving together, and recomputing the ratio each time,
gives the spread that other prompts of the same kind would show.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 2000
COVERAGE = 0.9


@dataclass(frozen=True)
class Interval:
    """The central ``COVERAGE`` share of the resampled ratios."""

    low: float
    high: float


def to_best_interval(
    candidate: Sequence[tuple[int, float]],
    baselines: Sequence[Sequence[tuple[int, float]]],
    *,
    seed: int = 0,
) -> Interval:
    """The interval of rate(candidate) / max(rate(baseline) for each baseline).

    Each sequence holds one (generated tokens, decode seconds) per prompt × repeat, in the
    same order for every mode; a rate is total tokens / total seconds over the resampled pairs.
    """
    count = len(candidate)
    if count == 0 or any(len(rows) != count for rows in baselines):
        raise ValueError("every mode needs one request per prompt × repeat, in the same order")
    picks = np.random.default_rng(seed).integers(0, count, size=(RESAMPLES, count))

    def rates(rows: Sequence[tuple[int, float]]) -> np.ndarray:
        tokens = np.array([row[0] for row in rows], dtype=np.float64)[picks].sum(axis=1)
        seconds = np.array([row[1] for row in rows], dtype=np.float64)[picks].sum(axis=1)
        return tokens / np.maximum(seconds, 1e-12)

    best = np.max([rates(rows) for rows in baselines], axis=0)
    ratios = rates(candidate) / best
    tail = (1.0 - COVERAGE) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return Interval(float(low), float(high))
