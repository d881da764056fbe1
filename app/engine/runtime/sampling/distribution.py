"""Distributions over the vocabulary as the sampler makes them, and what is done with them: draw a
token, read a token's probability, take the residual max(p − q, 0) that a rejected draft's
replacement is drawn from.

The acceptance arithmetic (the ratio p/q, the residual, the sums a draw walks) is float64: in
half precision it underflows or loses mass. A distribution over the whole vocabulary keeps its
weights in float32, as llama.cpp's logits are, with a float64 total: a 262k-token row is 1 MiB,
and making and reading float64 copies of it cost more per token than the rest of the loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

import numpy as np

DRAW_BLOCK = 4096
"""A draw over more weights than this walks block sums first, then one block."""


@dataclass(frozen=True)
class SparseDistribution:
    """Probabilities ``probs / total`` over ``tokens`` (ascending ids); every other token has
    probability 0.

    With top-k on, this holds the k candidates instead of a vocabulary-wide row, so drawing,
    the acceptance ratio and the residual cost a few candidates' work; their ``probs`` are
    float64 and sum to 1. Over the whole vocabulary (no filter), ``tokens`` is every id and
    ``probs`` the float32 weights, normalised by ``total``. Token ids ascend, so a draw walks the
    same cumulative sums as a draw from the dense row: with the same random number both pick the
    same token.
    """

    tokens: np.ndarray
    probs: np.ndarray
    total: float = 1.0
    block_sums: np.ndarray | None = field(default=None, compare=False)
    """``probs`` summed per block of :data:`DRAW_BLOCK` (float64), when already known."""

    @property
    def every_token(self) -> bool:
        return int(self.tokens[-1]) == self.tokens.size - 1  # ascending distinct ids

    def at(self, tokens: np.ndarray) -> np.ndarray:
        """The probabilities of ``tokens`` (0 for tokens outside the support), float64."""
        if tokens is self.tokens:
            return self.probs.astype(np.float64) / self.total
        if self.every_token:  # ids 0..n-1: a token's index is its id
            inside = tokens < self.tokens.size
            found = np.where(inside, self.probs[np.where(inside, tokens, 0)], 0.0)
            return found.astype(np.float64) / self.total
        index = np.minimum(np.searchsorted(self.tokens, tokens), self.tokens.size - 1)
        found = np.where(self.tokens[index] == tokens, self.probs[index], 0.0)
        return found.astype(np.float64) / self.total

    def dense(self, size: int) -> np.ndarray:
        """The same probabilities as a float64 row over a vocabulary of ``size`` tokens."""
        if self.every_token and self.tokens.size == size:
            return self.probs.astype(np.float64) / self.total
        probs = np.zeros(size, dtype=np.float64)
        probs[self.tokens] = self.probs
        return probs / self.total if self.total != 1.0 else probs


Distribution = np.ndarray | SparseDistribution
"""A dense probability row over the vocabulary, or a :class:`SparseDistribution`."""


@cache
def every_token(size: int) -> np.ndarray:
    """The ids 0..size-1 (read-only, made once per size)."""
    ids = np.arange(size)
    ids.flags.writeable = False
    return ids


def block_sums(weights: np.ndarray) -> np.ndarray:
    """``weights`` summed per block of :data:`DRAW_BLOCK`, in float64."""
    return np.add.reduceat(weights, np.arange(0, weights.size, DRAW_BLOCK), dtype=np.float64)


def draw(probs: Distribution, rng: np.random.Generator) -> int:
    """One token drawn from ``probs`` (any non-negative weights; normalised here).

    One uniform number picks the token where the cumulative weight passes it. A long row is
    walked in blocks (the block sums first, then the one block), which is what one cumulative
    sum over the row gives, at a fraction of its cost.
    """
    sparse = isinstance(probs, SparseDistribution)
    weights = probs.probs if sparse else probs
    uniform = rng.random()
    if weights.size <= DRAW_BLOCK:
        cumulative = np.cumsum(weights, dtype=np.float64)
        index = int(np.searchsorted(cumulative, uniform * cumulative[-1], side="right"))
    else:
        known = probs.block_sums if sparse else None
        index = _draw_in_blocks(weights, uniform, block_sums(weights) if known is None else known)
    return int(probs.tokens[index]) if sparse else index


def _draw_in_blocks(weights: np.ndarray, uniform: float, sums: np.ndarray) -> int:
    blocks = np.cumsum(sums)
    target = uniform * blocks[-1]
    block = min(int(np.searchsorted(blocks, target, side="right")), blocks.size - 1)
    before = float(blocks[block - 1]) if block else 0.0
    start = block * DRAW_BLOCK
    inside = np.cumsum(weights[start : start + DRAW_BLOCK], dtype=np.float64)
    offset = min(int(np.searchsorted(inside, target - before, side="right")), inside.size - 1)
    while offset > 0 and weights[start + offset] == 0:  # rounding at the block's end
        offset -= 1
    return start + offset


def probability(probs: Distribution, token: int) -> float:
    """The probability ``probs`` gives ``token``."""
    if isinstance(probs, SparseDistribution):
        return float(probs.at(np.array([token]))[0])
    return float(probs[token])


def residual(p: Distribution, q: Distribution) -> Distribution:
    """max(p − q, 0), unnormalised: where a rejected draft's replacement is drawn from."""
    if isinstance(p, SparseDistribution):
        q_on_p = q.at(p.tokens) if isinstance(q, SparseDistribution) else q[p.tokens]
        p_probs = p.probs.astype(np.float64) / p.total
        return SparseDistribution(p.tokens, np.maximum(p_probs - q_on_p, 0.0))
    dense_q = q.dense(p.size) if isinstance(q, SparseDistribution) else q
    return np.maximum(p - dense_q, 0.0)
