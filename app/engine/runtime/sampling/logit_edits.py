"""New logits for a few tokens of a row — penalties and ``logit_bias`` — without copying the row.

Penalties touch only the tokens that occurred, and a bias only the ids it lists: a handful of a
150–260k-token row. So they are kept as edits (ids and what is done to each) and the sampler asks
for what it needs — the arg-max, the largest value, the top k — from the row and the edits
together, the way the row with the edits written into it would answer, without writing it.

Each edited logit is computed in llama.cpp's order (its sampler chain puts ``logit_bias`` first,
then the penalties sampler): add the bias (a bias of −infinity bans the token); multiply a
logit ≤ 0 by the repetition factor, divide one > 0 by it (llama.cpp's and Hugging Face's
repetition penalty); subtract count × frequency penalty + presence penalty.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.engine.runtime.sampling.candidates import top_k_ids


@dataclass(frozen=True)
class LogitEdits:
    """What penalties and biases do to the tokens ``ids`` (ascending, distinct) of a row."""

    ids: np.ndarray
    bias: np.ndarray
    """Added first (float64; −inf bans the token)."""
    repeat: np.ndarray
    """The repetition factor of each token (1 for one outside the penalty window)."""
    subtract: np.ndarray
    """count × frequency penalty + presence penalty (0 for a token not yet in the reply)."""

    def values(self, logits: np.ndarray) -> np.ndarray:
        """The edited logits of ``ids`` (float64)."""
        values = logits[self.ids].astype(np.float64) + self.bias
        values = np.where(values <= 0, values * self.repeat, values / self.repeat)
        return values - self.subtract


def edited_top(logits: np.ndarray, edits: LogitEdits) -> tuple[int, float]:
    """The arg-max of the edited row (lowest id on ties) and its value."""
    values = edits.values(logits)
    best = int(logits.argmax())
    if _edited(edits, np.array([best]))[0]:  # the row's own arg-max is edited: the next best
        unedited = top_unedited(logits, edits, 1)
        if unedited.size == 0:  # every token of the row is edited
            index = int(values.argmax())
            return int(edits.ids[index]), float(values[index])
        best = int(unedited[logits[unedited].argmax()])
    ids = np.append(edits.ids, best)
    merged = np.append(values, float(logits[best]))
    peak = merged.max()
    winner = int(ids[merged == peak].min()) if not np.isnan(peak) else best
    return winner, float(peak)


def edited_top_k(logits: np.ndarray, edits: LogitEdits, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ids (ascending) whose edited logit is at least the k-th largest of the edited row
    (ties kept), and those edited logits (float64).

    The row's best unedited tokens are found first (:func:`top_unedited`); an edited token can
    be among the top k only if its edited logit reaches the k-th best of those.
    """
    values = edits.values(logits)
    unedited = top_unedited(logits, edits, k)
    unedited_values = logits[unedited].astype(np.float64)
    if unedited.size >= k:
        bound = np.partition(unedited_values, unedited.size - k)[unedited.size - k]
        reaching = values >= bound
    else:  # fewer than k unedited tokens in the whole row
        reaching = np.ones(values.size, dtype=bool)
    ids = np.concatenate([unedited, edits.ids[reaching]])
    merged = np.concatenate([unedited_values, values[reaching]])
    order = np.argsort(ids)
    ids, merged = ids[order], merged[order]
    kept = top_k_ids(merged, k)
    return ids[kept], merged[kept]


def top_unedited(logits: np.ndarray, edits: LogitEdits, k: int) -> np.ndarray:
    """Ascending ids of unedited tokens, at least ``k`` of them if the row has that many, such
    that every unedited token left out is below k of them: the row's top k' with the edited
    ones taken out, k' grown by the edited ones found until k remain (it starts at up to 2k:
    the tokens that occurred are often among the likeliest)."""
    wanted = k + min(edits.ids.size, k)
    while True:
        candidates = top_k_ids(logits, wanted)
        unedited = candidates[~_edited(edits, candidates)]
        if unedited.size >= k or candidates.size >= logits.size:
            return unedited
        wanted = k + candidates.size - unedited.size


def _edited(edits: LogitEdits, tokens: np.ndarray) -> np.ndarray:
    """Whether each of ``tokens`` is one of the edits' ids."""
    if edits.ids.size == 0:
        return np.zeros(tokens.size, dtype=bool)
    index = np.minimum(np.searchsorted(edits.ids, tokens), edits.ids.size - 1)
    return edits.ids[index] == tokens
