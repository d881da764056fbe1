"""Which tokens of a vocabulary-wide row can matter, found without sorting the row.

A real vocabulary is 150–260k tokens, and a full sort or selection over such a row costs more
than a decode step of many models (``np.argpartition`` on 262k floats: about 4 ms here; a stable
sort: more). The sampler needs only the few tokens at the top of a row — the k largest logits,
the most likely tokens that make up the top-p mass — so each is found by comparing the row with
a bound (one pass, vectorised) and ordering only the tokens that reach it. Every function gives
exactly what a full sort would.
"""

from __future__ import annotations

import numpy as np

_TOP_K_SAMPLE_PER_CANDIDATE = 8  # a strided sample of about 8·k logits bounds the top k ...
_TOP_K_MARGIN = 2  # ... at the rank where about 2·k logits of the row reach the bound
_TOP_P_FIRST_BOUND = 1e-3
"""Top-p first looks at the tokens at least this share as likely as the likeliest one ..."""
_TOP_P_BOUND_STEP = 1e-3
"""... and lowers the bound by this factor while they hold less than the top-p mass."""


def top_k_ids(logits: np.ndarray, k: int) -> np.ndarray:
    """Ascending ids of the tokens whose logit is at least the k-th largest (ties kept).

    A bound is taken from a strided sample first: if at least k logits reach it, the k-th
    largest is among them and only those few are selected from. Many tokens can share one
    logit (unused vocabulary slots all at the same value): when the bound is such a value, the
    tokens above it are used if they are k or more, else the k-th largest is the bound itself.
    """
    size = logits.size
    if k >= size:
        return np.arange(size)
    stride = max(1, size // (_TOP_K_SAMPLE_PER_CANDIDATE * k))
    sample = logits[::stride]
    rank = min(sample.size - 1, (_TOP_K_MARGIN * k) // stride + 1)
    bound = np.partition(sample, sample.size - 1 - rank)[sample.size - 1 - rank]
    reaching = np.flatnonzero(logits >= bound)
    if reaching.size < k:  # rare: the sample's bound is above the k-th largest
        reaching = np.arange(size)
    elif reaching.size > _TOP_K_SAMPLE_PER_CANDIDATE * k:
        above = np.flatnonzero(logits > bound)
        if above.size < k:  # the k-th largest is the bound: it and everything above it
            return reaching
        reaching = above
    values = logits[reaching]
    kth_largest = np.partition(values, values.size - k)[values.size - k]
    return reaching[values >= kth_largest]


def top_p_ids(weights: np.ndarray, mass: float) -> np.ndarray:
    """Ascending ids of the smallest set of heaviest tokens whose ``weights`` (probabilities,
    normalised or not) add up to at least ``mass`` — top-p is ``mass`` = p × the total — ties
    broken by the lower id.

    The tokens at least a share of the heaviest one's weight are ordered first; if they hold
    less than ``mass``, the share is lowered and the larger set ordered. Every token left out
    weighs less than every one ordered, so the kept set is the one a full stable sort by
    descending weight gives.
    """
    share = _TOP_P_FIRST_BOUND
    peak = float(weights.max())
    while True:
        bound = peak * share
        candidates = np.flatnonzero(weights >= bound) if bound > 0 else np.arange(weights.size)
        values = weights[candidates]
        order = np.lexsort((candidates, -values))
        cumulative = np.cumsum(values[order], dtype=np.float64)
        if cumulative[-1] >= mass or candidates.size == weights.size:
            keep = min(int(np.searchsorted(cumulative, mass)) + 1, order.size)
            return np.sort(candidates[order[:keep]])
        share *= _TOP_P_BOUND_STEP
