"""The one sampler definition: logits → the distribution a token is drawn from.

Plain decoding, the draft's proposal q and the target's p must all go through the *same*
transform, or speculative decoding silently stops sampling from the model's distribution. So
there is exactly one function, :func:`distribution`, and everything that samples calls it.

The order is fixed and documented: **temperature → top-k → top-p → min-p**, then renormalise.

- temperature 0 means greedy: the distribution is one-hot on the arg-max (lowest id on ties);
- top-k keeps the k largest logits (``0`` = off; ties at the k-th value are all kept);
- top-p keeps the smallest set of most likely tokens whose mass reaches p (``1.0`` = off);
- min-p keeps tokens whose probability is at least ``min_p`` × the largest one (``0.0`` = off).

Arithmetic is float64 on the host: the acceptance ratio p/q and the residual max(p − q, 0)
underflow or lose mass in half precision.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.engine.errors import RuntimeBackendError

_TOP_P_FIRST_CANDIDATES = 64


@dataclass(frozen=True)
class SamplerSettings:
    """How to turn logits into a token. ``seed`` None draws a fresh seed per request."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    seed: int | None = None

    def __post_init__(self) -> None:
        if not self.temperature >= 0.0:
            raise RuntimeBackendError(
                f"temperature {self.temperature} is invalid: use 0 (greedy) or a positive value"
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
    return int(np.argmax(logits))


def distribution(logits: np.ndarray, settings: SamplerSettings) -> np.ndarray:
    """Probabilities (float64, summing to 1) over the vocabulary for one row of logits."""
    size = logits.shape[-1]
    probs = np.zeros(size, dtype=np.float64)
    if settings.greedy:
        probs[greedy_token(logits)] = 1.0
        return probs
    if 0 < settings.top_k < size:
        # Only the top-k candidates (ties at the k-th value kept) can get any mass, so the rest of
        # the transform runs on those few entries instead of the whole vocabulary. Dividing by a
        # positive temperature keeps the order, so the raw logits select the same candidates.
        largest = np.argpartition(logits, size - settings.top_k)[size - settings.top_k :]
        candidates = np.flatnonzero(logits >= logits[largest].min())
    else:
        candidates = np.arange(size)
    scaled = logits[candidates].astype(np.float64) / settings.temperature
    kept = np.exp(scaled - scaled.max())
    kept /= kept.sum()
    if settings.top_p < 1.0:
        kept = _keep_top_p(kept, settings.top_p)
    if settings.min_p > 0.0:
        kept[kept < settings.min_p * kept.max()] = 0.0
        kept /= kept.sum()
    probs[candidates] = kept
    return probs


def _keep_top_p(probs: np.ndarray, top_p: float) -> np.ndarray:
    """Zero all but the smallest most-likely prefix with mass ≥ ``top_p``, then renormalise.

    ``probs`` is indexed in ascending token order (the whole vocabulary, or the top-k candidates),
    so ties are broken by the lower token id. A full sort of a 150k vocabulary per row would
    dominate a decode step, so the candidates are found by partitioning a growing number of the
    largest entries; the kept set is the same as with a full stable sort by descending probability.
    """
    count = min(_TOP_P_FIRST_CANDIDATES, probs.size)
    while True:
        if count < probs.size:
            candidates = np.argpartition(-probs, count)[:count]
        else:
            candidates = np.arange(probs.size)
        order = candidates[np.lexsort((candidates, -probs[candidates]))]
        cumulative = np.cumsum(probs[order])
        if cumulative[-1] >= top_p or count >= probs.size:
            keep_count = int(np.searchsorted(cumulative, top_p)) + 1
            kept = order[: min(keep_count, order.size)]
            result = np.zeros_like(probs)
            result[kept] = probs[kept]
            return result / result.sum()
        count = min(count * 4, probs.size)


def draw(probs: np.ndarray, rng: np.random.Generator) -> int:
    """One token drawn from ``probs`` (any non-negative weights; normalised here)."""
    cumulative = np.cumsum(probs)
    return int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"))
