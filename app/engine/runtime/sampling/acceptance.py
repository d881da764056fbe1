"""Acceptance laws of one speculative cycle: which drafts are kept and which token comes next.

Two exact laws are offered so they can be measured against each other
(docs/architecture.md#acceptance-laws):

- **Leviathan–Chen** (``lc``): accept draft d_i with probability min(1, p_i(d_i) / q_i(d_i));
  on the first rejection draw the replacement from normalise(max(p_i − q_i, 0)); if every draft
  is accepted draw a bonus token from p_{K+1}. Output tokens are distributed exactly as p.
- **sample-and-compare** (``match``), what mlx-lm's and llama.cpp's loops do: draw t_i from p_i
  and keep going while t_i equals d_i. Also exact, but accepts less often when T > 0.

Both work on float64 distributions from the one sampler definition
(:func:`app.engine.runtime.sampling.sampler.sparse_distribution` in the decoding loop, dense rows in
the math tests; the two give the same draws) and draw every random number from the request's seeded
generator.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from app.engine.runtime.sampling.distribution import Distribution, draw, probability, residual


class AcceptMode(StrEnum):
    LEVIATHAN_CHEN = "lc"
    MATCH = "match"


@dataclass(frozen=True)
class CycleOutcome:
    """``accepted`` drafts were kept (0..K); ``next_token`` is the repair, match or bonus token."""

    accepted: int
    next_token: int


def accept_leviathan_chen(
    drafts: Sequence[int],
    proposal_probs: Sequence[Distribution],
    target_probs: Sequence[Distribution],
    rng: np.random.Generator,
) -> CycleOutcome:
    """Leviathan–Chen acceptance with residual repair; ``target_probs`` has K + 1 rows."""
    for depth, draft in enumerate(drafts):
        p = target_probs[depth]
        q = proposal_probs[depth]
        p_draft = probability(p, draft)
        q_draft = probability(q, draft)
        if p_draft >= q_draft or rng.random() * q_draft < p_draft:
            continue
        return CycleOutcome(depth, draw(residual(p, q), rng))
    return CycleOutcome(len(drafts), draw(target_probs[len(drafts)], rng))


def accept_by_matching(
    drafts: Sequence[int],
    target_probs: Sequence[Distribution],
    rng: np.random.Generator,
) -> CycleOutcome:
    """Sample-and-compare: draw from p_i, keep the draft while the draw equals it."""
    for depth, draft in enumerate(drafts):
        sampled = draw(target_probs[depth], rng)
        if sampled != draft:
            return CycleOutcome(depth, sampled)
    return CycleOutcome(len(drafts), draw(target_probs[len(drafts)], rng))
