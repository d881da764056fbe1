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

import math
from dataclasses import dataclass

import numpy as np

from app.engine.errors import RuntimeBackendError

MIN_TEMPERATURE = 1e-3
"""The smallest temperature above 0: logits divided by a temperature like 1e-320 overflow to
infinity and the distribution becomes NaN, while at 0.001 sampling already picks the most likely
token almost always."""
_TOP_P_FIRST_CANDIDATES = 64
_TOP_K_SAMPLE_PER_CANDIDATE = 8  # a strided sample of about 8·k logits bounds the top k ...
_TOP_K_MARGIN = 2  # ... at the rank where about 2·k logits of the row reach the bound


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
    return int(np.argmax(logits))


@dataclass(frozen=True)
class SparseDistribution:
    """Probabilities over ``tokens`` (ascending ids); every other token has probability 0.

    With top-k on, this holds the k candidates instead of a vocabulary-wide row, so drawing,
    the acceptance ratio and the residual cost a few candidates' work. Token ids ascend, so a
    draw walks the same cumulative sums as a draw from the dense row: with the same random
    number both pick the same token.
    """

    tokens: np.ndarray
    probs: np.ndarray

    def at(self, tokens: np.ndarray) -> np.ndarray:
        """The probabilities of ``tokens`` (0 for tokens outside the support)."""
        if self.tokens[-1] == self.tokens.size - 1:  # ascending distinct ids: every token
            return self.probs[tokens]
        index = np.minimum(np.searchsorted(self.tokens, tokens), self.tokens.size - 1)
        return np.where(self.tokens[index] == tokens, self.probs[index], 0.0)

    def dense(self, size: int) -> np.ndarray:
        """The same probabilities as a row over a vocabulary of ``size`` tokens."""
        probs = np.zeros(size, dtype=np.float64)
        probs[self.tokens] = self.probs
        return probs


Distribution = np.ndarray | SparseDistribution
"""A dense probability row over the vocabulary, or a :class:`SparseDistribution`."""


def sparse_distribution(logits: np.ndarray, settings: SamplerSettings) -> SparseDistribution:
    """The sampler's distribution for one row of logits, over the tokens that can get mass."""
    size = logits.shape[-1]
    if settings.greedy:
        return SparseDistribution(np.array([greedy_token(logits)]), np.ones(1))
    # Only the top-k candidates (ties at the k-th value kept) can get any mass, so the rest of
    # the transform runs on those few entries instead of the whole vocabulary. Dividing by a
    # positive temperature keeps the order, so the raw logits select the same candidates.
    top_k_on = 0 < settings.top_k < size
    candidates = top_k_ids(logits, settings.top_k) if top_k_on else np.arange(size)
    scaled = logits[candidates].astype(np.float64) / settings.temperature
    top = scaled.max() if scaled.size else np.nan
    if not np.isfinite(top):  # NaN compares false everywhere, so top-k kept nothing
        raise RuntimeBackendError(
            "the model computed logits that are not numbers (NaN or infinity): its weights are "
            "damaged; download or convert the model again"
        )
    kept = np.exp(scaled - top)
    kept /= kept.sum()
    if settings.top_p < 1.0:
        kept = _keep_top_p(kept, settings.top_p)
    if settings.min_p > 0.0:
        kept[kept < settings.min_p * kept.max()] = 0.0
        kept /= kept.sum()
    return SparseDistribution(candidates, kept)


def top_k_ids(logits: np.ndarray, k: int) -> np.ndarray:
    """Ascending ids of the tokens whose logit is at least the k-th largest (ties kept).

    A full selection over the vocabulary costs far more than one comparison pass, so a bound is
    taken from a strided sample first: if at least k logits reach it, the k-th largest is among
    them and only those few are partitioned. Otherwise (rare) the whole row is.
    """
    size = logits.size
    stride = max(1, size // (_TOP_K_SAMPLE_PER_CANDIDATE * k))
    sample = logits[::stride]
    rank = min(sample.size - 1, (_TOP_K_MARGIN * k) // stride + 1)
    bound = np.partition(sample, sample.size - 1 - rank)[sample.size - 1 - rank]
    reaching = np.flatnonzero(logits >= bound)
    if reaching.size < k:
        reaching = np.arange(size)
    values = logits[reaching]
    kth_largest = np.partition(values, values.size - k)[values.size - k]
    return reaching[values >= kth_largest]


def distribution(logits: np.ndarray, settings: SamplerSettings) -> np.ndarray:
    """Probabilities (float64, summing to 1) over the vocabulary for one row of logits."""
    return sparse_distribution(logits, settings).dense(logits.shape[-1])


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
            order = candidates[np.lexsort((candidates, -probs[candidates]))]
        else:
            order = np.argsort(-probs, kind="stable")
        cumulative = np.cumsum(probs[order])
        if cumulative[-1] >= top_p or count >= probs.size:
            keep_count = int(np.searchsorted(cumulative, top_p)) + 1
            kept = order[: min(keep_count, order.size)]
            result = np.zeros_like(probs)
            result[kept] = probs[kept]
            return result / result.sum()
        count = min(count * 4, probs.size)


def draw(probs: Distribution, rng: np.random.Generator) -> int:
    """One token drawn from ``probs`` (any non-negative weights; normalised here)."""
    weights = probs.probs if isinstance(probs, SparseDistribution) else probs
    cumulative = np.cumsum(weights)
    index = int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"))
    return int(probs.tokens[index]) if isinstance(probs, SparseDistribution) else index


def sample(logits: np.ndarray, settings: SamplerSettings, rng: np.random.Generator) -> int:
    """One token for a row of logits: the arg-max at temperature 0, else a draw."""
    if settings.greedy:
        return greedy_token(logits)
    return draw(sparse_distribution(logits, settings), rng)


def probability(probs: Distribution, token: int) -> float:
    """The probability ``probs`` gives ``token``."""
    if isinstance(probs, SparseDistribution):
        return float(probs.at(np.array([token]))[0])
    return float(probs[token])


def residual(p: Distribution, q: Distribution) -> Distribution:
    """max(p − q, 0), unnormalised: where a rejected draft's replacement is drawn from."""
    if isinstance(p, SparseDistribution):
        q_on_p = q.at(p.tokens) if isinstance(q, SparseDistribution) else q[p.tokens]
        return SparseDistribution(p.tokens, np.maximum(p.probs - q_on_p, 0.0))
    dense_q = q.dense(p.size) if isinstance(q, SparseDistribution) else q
    return np.maximum(p - dense_q, 0.0)
