"""The one sampler definition: logits → the distribution a token is drawn from.

Plain decoding, the draft's proposal q and the target's p must all go through the *same*
transform, or speculative decoding silently stops sampling from the model's distribution. So
there is exactly one function, :func:`sparse_distribution` (:func:`distribution` is the same as a
dense row), and everything that samples calls it.

The order is fixed and documented: **logit bias and penalties → temperature → top-k → top-p →
min-p**, then renormalise.

- ``logit_bias`` and the repetition, presence and frequency penalties edit the logits of the
  few tokens they name or that occurred (:mod:`.penalties` says which count, :mod:`.logit_edits`
  how); the caller passes the row's edits, the same for a draft's q and the target's p;

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

The rows are read-only views of the backend's buffer: the edits are applied to the candidates'
values, or to the row of exponentials that is computed anyway — never to a copy of the row.
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
from app.engine.runtime.sampling.logit_edits import LogitEdits, edited_top, edited_top_k

MIN_TEMPERATURE = 1e-3
"""The smallest temperature above 0: logits divided by a temperature like 1e-320 overflow to
infinity and the distribution becomes NaN, while at 0.001 sampling already picks the most likely
token almost always."""
BANNING_BIAS = -100.0
"""A ``logit_bias`` this low bans the token (OpenAI: "-100 should result in a ban")."""
MAX_BIAS = 100.0
PENALTY_WINDOW = 64
"""The repetition penalty's window by default: llama.cpp's ``repeat_last_n``."""
MAX_PRESENCE_OR_FREQUENCY = 2.0
"""OpenAI's range for presence and frequency penalties is −2 to 2."""


@dataclass(frozen=True)
class SamplerSettings:
    """How to turn logits into a token. ``seed`` None draws a fresh seed per request."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    seed: int | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    penalty_window: int = PENALTY_WINDOW
    logit_bias: tuple[tuple[int, float], ...] = ()
    """(token id, bias) pairs; a bias of :data:`BANNING_BIAS` bans the token."""

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
        self._check_penalties()

    def _check_penalties(self) -> None:
        for name in ("presence_penalty", "frequency_penalty"):
            value = getattr(self, name)
            if not -MAX_PRESENCE_OR_FREQUENCY <= value <= MAX_PRESENCE_OR_FREQUENCY:
                raise RuntimeBackendError(
                    f"{name} {value} is invalid: use a value from -2 to 2; 0 turns it off"
                )
        if not 0.0 < self.repetition_penalty < math.inf:
            raise RuntimeBackendError(
                f"repetition penalty {self.repetition_penalty} is invalid: use a value above 0 "
                "(1 turns it off; 1.1 is common)"
            )
        if self.penalty_window < 0:
            raise RuntimeBackendError(
                f"penalty window {self.penalty_window} is invalid: use a count of tokens ≥ 0"
            )
        for token, bias in self.logit_bias:
            if token < 0 or not -MAX_BIAS <= bias <= MAX_BIAS:
                raise RuntimeBackendError(
                    f"logit bias {bias} for token {token} is invalid: use token ids ≥ 0 and "
                    "biases from -100 (bans the token) to 100"
                )

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def greedy_token(logits: np.ndarray, edits: LogitEdits | None = None) -> int:
    """The arg-max token (of the row with ``edits``): what :func:`distribution` is one-hot on at
    temperature 0."""
    if edits is None:
        return int(logits.argmax())
    return edited_top(logits, edits)[0]


def sparse_distribution(
    logits: np.ndarray, settings: SamplerSettings, edits: LogitEdits | None = None
) -> SparseDistribution:
    """The sampler's distribution for one row of logits with its ``edits`` (penalties and
    bias), over the tokens that can get mass."""
    size = logits.shape[-1]
    if settings.greedy:
        return SparseDistribution(np.array([greedy_token(logits, edits)]), np.ones(1))
    # Only the top-k candidates (ties at the k-th value kept) can get any mass, so the rest of
    # the transform runs on those few entries instead of the whole vocabulary. Dividing by a
    # positive temperature keeps the order, so the raw logits select the same candidates.
    if 0 < settings.top_k < size:
        if edits is None:
            candidates = top_k_ids(logits, settings.top_k)
            return _candidates_distribution(candidates, logits[candidates], settings)
        return _candidates_distribution(*edited_top_k(logits, edits, settings.top_k), settings)
    return _vocabulary_distribution(logits, settings, edits)


def _candidates_distribution(
    candidates: np.ndarray, values: np.ndarray, settings: SamplerSettings
) -> SparseDistribution:
    """Temperature, top-p and min-p over a few candidates (ascending ids) whose logits are
    ``values``, in float64."""
    scaled = values.astype(np.float64) / settings.temperature
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


def _vocabulary_distribution(
    logits: np.ndarray, settings: SamplerSettings, edits: LogitEdits | None
) -> SparseDistribution:
    """Temperature, top-p and min-p over the whole row: float32 exponentials (the largest is
    exactly 1), float64 sums; top-p and min-p leave the few tokens they keep, in float64. The
    edits are written into the row of differences from the top, which is made anyway."""
    top = logits.max() if edits is None else edited_top(logits, edits)[1]  # NaN if any is NaN
    _require_number(top)
    weights = np.subtract(logits, top, dtype=np.float32)
    if edits is not None:
        weights[edits.ids] = edits.values(logits) - top
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


def distribution(
    logits: np.ndarray, settings: SamplerSettings, edits: LogitEdits | None = None
) -> np.ndarray:
    """Probabilities (float64, summing to 1) over the vocabulary for one row of logits."""
    return sparse_distribution(logits, settings, edits).dense(logits.shape[-1])


def sample(
    logits: np.ndarray,
    settings: SamplerSettings,
    rng: np.random.Generator,
    edits: LogitEdits | None = None,
) -> int:
    """One token for a row of logits (with ``edits``): the arg-max at temperature 0, else a
    draw."""
    if settings.greedy:
        return greedy_token(logits, edits)
    return draw(sparse_distribution(logits, settings, edits), rng)
