"""The one sampler definition: logits → the distribution a token is drawn from.

Plain decoding, the draft's proposal q and the target's p must all go through the *same*
transform, or speculative decoding silently stops sampling from the model's distribution. So
there is exactly one function, :func:`sparse_distribution` (:func:`distribution` is the same as a
dense row), and everything that samples calls it.

The order is fixed and documented: **temperature → top-k → top-p → min-p**, then renormalise.

- temperature 0 means greedy: the distribution is one-hot on the arg-max (lowest id on ties);
- top-k keeps the k largest logits (``0`` = off; ties at the k-th value are all kept);
- top-p keeps the smallest set of most likely tokens whose mass reaches p (``1.0`` = off);
- min-p keeps tokens whose probability is at least ``min_p`` × the largest one (``0.0`` = off).

Each step touches as little of the row as it can (:mod:`.candidates`): with top-k on, only the k
candidates are ever exponentiated, in float64. Without it every token can get mass, so the
temperature-scaled exponentials of the whole row are taken once, in float32 (llama.cpp's logits
are float32; a float64 exponential of a 262k-token row alone cost 0.65 ms here), and every sum
over them is float64; top-p and min-p then cut the row to the few tokens they keep. The ratio
p/q and the residual max(p − q, 0) are float64 (:mod:`.distribution`): in half precision they
underflow or lose mass.

The rows are read-only views of the backend's buffer: a step that changes logits (penalties)
works on the candidates' values or on a copy, before the temperature.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.sampling.candidates import top_k_ids, top_p_ids
from app.engine.runtime.sampling.distribution import (
    SparseDistribution,
    block_sums,
    draw,
    every_token,
)

MIN_TEMPERATURE = 1e-3
"""The smallest temperature above 0: logits divided by a temperature like 1e-320 overflow to
infinity and the distribution becomes NaN, while at 0.001 sampling already picks the most likely
token almost always."""


@dataclass(frozen=True)
class SamplerSettings:
    """How to turn logits into a token. ``seed`` None draws a fresh seed per request."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    seed: int | None = None

    def __post_init__(self) -> None:
        if not (self.temperature == 0.0 or MIN_TEMPERATURE <= self.temperature < math.inf):
            raise RuntimeBackendError(
                f"temperature {self.temperature} is invalid: use 0 (greedy) or a value of at "
                f"least {MIN_TEMPERATURE:g}"
            )
        if self.top_k < 0:
            raise RuntimeBackendError(f"top-k {self.top_k} is invalid: use 0 (off) or a count ≥ 1")
        if not 0.0 < self.top_p <= 1.0:
            raise RuntimeBackendError(
                f"top-p {self.top_p} is invalid: use a value in (0, 1]; 1 turns it off"
            )
        if not 0.0 <= self.min_p < 1.0:
            raise RuntimeBackendError(
                f"min-p {self.min_p} is invalid: use a value in [0, 1); 0 turns it off"
            )

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def greedy_token(logits: np.ndarray) -> int:
    """The arg-max token: what :func:`distribution` is one-hot on at temperature 0."""
    return int(logits.argmax())


def sparse_distribution(logits: np.ndarray, settings: SamplerSettings) -> SparseDistribution:
    """The sampler's distribution for one row of logits, over the tokens that can get mass."""
    size = logits.shape[-1]
    if settings.greedy:
        return SparseDistribution(np.array([greedy_token(logits)]), np.ones(1))
    # Only the top-k candidates (ties at the k-th value kept) can get any mass, so the rest of
    # the transform runs on those few entries instead of the whole vocabulary. Dividing by a
    # positive temperature keeps the order, so the raw logits select the same candidates.
    if 0 < settings.top_k < size:
        return _candidates_distribution(logits, top_k_ids(logits, settings.top_k), settings)
    return _vocabulary_distribution(logits, settings)


def _candidates_distribution(
    logits: np.ndarray, candidates: np.ndarray, settings: SamplerSettings
) -> SparseDistribution:
    """Temperature, top-p and min-p over a few candidates (ascending ids), in float64."""
    scaled = logits[candidates].astype(np.float64) / settings.temperature
    top = scaled.max() if scaled.size else np.nan  # NaN compares false: top-k kept nothing
    _require_number(top)
    kept = np.exp(scaled - top)
    kept /= kept.sum()
    if settings.top_p < 1.0:
        inside = top_p_ids(kept, settings.top_p)
        top_p_kept = np.zeros_like(kept)
        top_p_kept[inside] = kept[inside]
        kept = top_p_kept / top_p_kept.sum()
    if settings.min_p > 0.0:
        kept[kept < settings.min_p * kept.max()] = 0.0
        kept /= kept.sum()
    return SparseDistribution(candidates, kept)


def _vocabulary_distribution(logits: np.ndarray, settings: SamplerSettings) -> SparseDistribution:
    """Temperature, top-p and min-p over the whole row: float32 exponentials (the largest is
    exactly 1), float64 sums; top-p and min-p leave the few tokens they keep, in float64."""
    top = logits.max()  # NaN if any logit is NaN
    _require_number(top)
    weights = np.subtract(logits, top, dtype=np.float32)
    weights /= np.float32(settings.temperature)
    np.exp(weights, out=weights)
    sums = block_sums(weights)  # what a draw walks first, and the total
    total = float(sums.sum())
    if settings.top_p >= 1.0 and settings.min_p <= 0.0:
        return SparseDistribution(every_token(weights.size), weights, total, sums)
    if settings.top_p < 1.0:
        tokens = top_p_ids(weights, settings.top_p * total, peak=1.0)
        if settings.min_p > 0.0:  # the likeliest token's weight is 1
            tokens = tokens[weights[tokens] >= settings.min_p]
    else:
        tokens = np.flatnonzero(weights >= settings.min_p)
    kept = weights[tokens].astype(np.float64)
    return SparseDistribution(tokens, kept / kept.sum())


def _require_number(top: float) -> None:
    """Refuse a row whose largest logit is not a finite number (damaged weights)."""
    if not np.isfinite(top):
        raise RuntimeBackendError(
            "the model computed logits that are not numbers (NaN or infinity): its weights are "
            "damaged; download or convert the model again"
        )


def distribution(logits: np.ndarray, settings: SamplerSettings) -> np.ndarray:
    """Probabilities (float64, summing to 1) over the vocabulary for one row of logits."""
    return sparse_distribution(logits, settings).dense(logits.shape[-1])


def sample(logits: np.ndarray, settings: SamplerSettings, rng: np.random.Generator) -> int:
    """One token for a row of logits: the arg-max at temperature 0, else a draw."""
    if settings.greedy:
        return greedy_token(logits)
    return draw(sparse_distribution(logits, settings), rng)
