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
    """The arg-max of the edited row (lowest id on ties) and its value.

    The row's own arg-max is the best unedited token unless it is edited itself; then the best
    unedited token is among the row's m + 1 largest (m edited ids).
    """
    values = edits.values(logits)
    best = int(logits.argmax())
    position = int(np.searchsorted(edits.ids, best))
    if position < edits.ids.size and edits.ids[position] == best:
        candidates = top_k_ids(logits, edits.ids.size + 1)
        unedited = candidates[~np.isin(candidates, edits.ids)]
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

    An unedited token in the edited top k is among the row's k + m largest: otherwise k + m
    tokens would be above it, k of them unedited and so above it in the edited row too.
    """
    candidates = np.union1d(top_k_ids(logits, k + edits.ids.size), edits.ids)
    values = logits[candidates].astype(np.float64)
    values[np.searchsorted(candidates, edits.ids)] = edits.values(logits)
    kept = top_k_ids(values, k)
    return candidates[kept], values[kept]
