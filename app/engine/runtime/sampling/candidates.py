"""Which tokens of a vocabulary-wide row can matter, found without sorting the row.

A real vocabulary is 150–260k tokens, and a full sort or selection over such a row costs more
than a decode step of many models (``np.argpartition`` on 262k floats: about 2.5 ms here; a stable
sort: more). The sampler needs only the few tokens at the top of a row — the k largest logits,
the most likely tokens that make up the top-p mass — so each is found by one vectorised pass
over the row and ordering only the few tokens it leaves. Every function gives exactly what a full
sort would.
"""

from __future__ import annotations

import numpy as np

_TOP_K_GROUPS_PER_CANDIDATE = 50
"""Top-k splits the row into about this many groups per candidate (at most
:data:`_TOP_K_MAX_GROUP`'s worth of tokens each) ..."""
_TOP_K_MAX_GROUP = 128
"""... so a group's share of the row stays small: the top k lie in at most k groups, and those
groups' tokens are all that is ordered."""
_TOP_K_TIED_GROUPS = 2
"""More than this many groups per candidate reaching the bound means many tokens share it."""
_SORTED_SELECTION = 16384
_TOP_P_FIRST_BOUND = 1e-3
"""Top-p first looks at the tokens at least this share as likely as the likeliest one ..."""
_TOP_P_BOUND_STEP = 1e-3
"""... and lowers the bound by this factor while they hold less than the top-p mass."""


def top_k_ids(logits: np.ndarray, k: int) -> np.ndarray:
    """Ascending ids of the tokens whose logit is at least the k-th largest (ties kept).

    The row is read once, as a grid of ``rows`` × ``groups`` (token ``r·groups + g`` in group
    ``g``; the few tokens past the grid are groups of one): the largest logit of every group,
    an elementwise maximum over the grid's rows. The k largest group maxima are k tokens, so the
    k-th largest logit is at least the k-th largest group maximum ``bound``, and every token at
    or above it lies in a group whose maximum reaches the bound: usually k groups, whose tokens
    are all that is selected from. Many groups reach it only when many tokens share the bound
    (unused vocabulary slots all at one logit): then the groups above it are used if they hold
    k tokens above it, else the k-th largest is the bound itself and the answer is every token
    at or above it. A NaN counts as larger than every number, as in a sort: a row with one
    gives its NaN tokens (the sampler refuses them).
    """
    size = logits.size
    if k >= size:
        return np.arange(size)
    rows = max(1, min(_TOP_K_MAX_GROUP, size // (_TOP_K_GROUPS_PER_CANDIDATE * k)))
    groups = size // rows
    gridded = rows * groups
    maxima = np.concatenate((logits[:gridded].reshape(rows, groups).max(axis=0), logits[gridded:]))
    if np.isnan(maxima).any():  # the maximum of a group with a NaN is NaN
        return np.flatnonzero(np.isnan(logits))
    bound = _kth_largest(maxima, k)
    reaching = np.flatnonzero(maxima >= bound)
    ties = reaching.size > _TOP_K_TIED_GROUPS * k
    ids = _group_ids(reaching[maxima[reaching] > bound] if ties else reaching, groups, gridded)
    values = logits[ids]
    kept = values > bound if ties else values >= bound
    ids, values = ids[kept], values[kept]
    if values.size < k:  # the k-th largest is the bound, which many tokens share
        return np.flatnonzero(logits >= bound)
    return np.sort(ids[values >= _kth_largest(values, k)])


def _kth_largest(values: np.ndarray, k: int) -> np.floating:
    """The k-th largest of ``values``: by a full sort up to :data:`_SORTED_SELECTION` values
    (numpy's selection slows down many times over on many equal values, as a row's unused slots
    are; its sort does not), by a selection beyond."""
    if values.size <= _SORTED_SELECTION:
        return np.sort(values)[values.size - k]
    return np.partition(values, values.size - k)[values.size - k]


def _group_ids(chosen: np.ndarray, groups: int, gridded: int) -> np.ndarray:
    """The token ids of the ``chosen`` groups of :func:`top_k_ids`'s grid (unordered)."""
    in_grid = chosen[chosen < groups]
    ids = (np.arange(0, gridded, groups)[:, None] + in_grid).ravel()
    return np.concatenate((ids, chosen[chosen >= groups] + (gridded - groups)))


def top_p_ids(weights: np.ndarray, mass: float, peak: float | None = None) -> np.ndarray:
    """Ascending ids of the smallest set of heaviest tokens whose ``weights`` (probabilities,
    normalised or not) add up to at least ``mass`` — top-p is ``mass`` = p × the total — ties
    broken by the lower id.

    The tokens at least a share of the heaviest one's weight are ordered first; if they hold
    less than ``mass``, the share is lowered and the larger set ordered. Every token left out
    weighs less than every one ordered, so the kept set is the one a full stable sort by
    descending weight gives. ``peak`` is the largest weight when the caller knows it.
    """
    if weights.size <= _SORTED_SELECTION:  # a few candidates: one stable sort is cheapest
        found = _heaviest_reaching(np.arange(weights.size), weights, mass)
        return np.arange(weights.size) if found is None else found
    share = _TOP_P_FIRST_BOUND
    if peak is None:
        peak = float(weights.max())
    while True:
        bound = peak * share
        candidates = np.flatnonzero(weights >= bound) if bound > 0 else np.arange(weights.size)
        found = _heaviest_reaching(candidates, weights[candidates], mass)
        if found is not None or candidates.size == weights.size:
            return candidates if found is None else found
        share *= _TOP_P_BOUND_STEP


def _heaviest_reaching(ids: np.ndarray, values: np.ndarray, mass: float) -> np.ndarray | None:
    """Ascending ``ids`` of the fewest heaviest ``values`` (ties: the lower id first; ``ids``
    ascend) whose sum reaches ``mass``; None when all of them do not."""
    order = np.argsort(-values, kind="stable")
    cumulative = np.cumsum(values[order], dtype=np.float64)
    if cumulative[-1] < mass:
        return None
    return np.sort(ids[order[: int(np.searchsorted(cumulative, mass)) + 1]])
