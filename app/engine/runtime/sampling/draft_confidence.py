"""End a cycle's draft at a token the MTP head is unsure of, when it would cost more than it buys.

llama-server users pass ``--spec-draft-p-min 0.75``: drafting a low-confidence token costs a
draft step and is usually rejected. A fixed threshold is right for one model on one machine;
here it follows from what is measured instead. The head's confidence in a draft is its
probability for it: under the request's sampler when sampling (the q the draft was drawn from,
already computed; llama-server's p-min reads its draft sampler the same way), and at greedy
decoding the softmax at temperature 1 over the head's 32 likeliest tokens (a softmax over the
whole vocabulary cost 3.8 ms a draft on a 152k vocabulary, more than a draft step of the demo
model; this costs 0.13 ms, and only the order matters since each band's acceptance is
measured). Drafts are grouped by that confidence into ten bands, and each band's acceptance is
learned from verified drafts (a draft counts only when every draft before it was accepted, so
it was really tested), apart for greedy and sampled requests. A further draft is made while

    P(committed) / c  ≥  E / (1 + k·c)

where P(committed) is the product of the bands' acceptances of the drafts so far and of this
one, c the draft step's cost over a verify call's (measured in the request), k the drafts so
far and E the tokens the cycle is expected to yield without it: the draft's tokens per unit of
time must beat the cycle's own. The decision reads only the head's logits, never the target's,
so Leviathan–Chen acceptance stays exact (the draft length is a stopping time of the draft
alone), and greedy output is unchanged.
"""

from __future__ import annotations

import numpy as np

from app.engine.runtime.sampling.candidates import top_k_ids

BANDS = 10
PRIOR_WEIGHT = 4.0
"""Pseudo-drafts per band at its midpoint acceptance before any is measured."""
CONFIDENCE_CANDIDATES = 32
FALLBACK_COST_RATIO = 0.1
"""c before a request has timed a draft step and a verify call."""


def head_confidence(logits: np.ndarray, token: int) -> float:
    """The head's probability for ``token`` at temperature 1 among its
    :data:`CONFIDENCE_CANDIDATES` likeliest tokens (0 when ``token`` is not one of them)."""
    if logits.size > CONFIDENCE_CANDIDATES:
        values = logits[top_k_ids(logits, CONFIDENCE_CANDIDATES)].astype(np.float64)
    else:
        values = logits.astype(np.float64)
    if logits[token] < values.min():
        return 0.0
    peak = values.max()
    return float(np.exp(float(logits[token]) - peak) / np.exp(values - peak).sum())


def band_of(confidence: float) -> int:
    return min(int(confidence * BANDS), BANDS - 1)


class ConfidenceStop:
    """What the drafts' confidence bands were accepted at, and the stopping rule above.

    One per loaded model (the worker keeps it across requests); :meth:`start_cycle` before each
    draft, :meth:`keeps_drafting` for each drafted token, :meth:`learn` after the verify.
    """

    def __init__(self) -> None:
        # Per kind of request (greedy: True), drafts that reached the verify and were kept.
        self._counts = {kind: (np.zeros(BANDS), np.zeros(BANDS)) for kind in (True, False)}
        self._greedy = True
        self._bands: list[int] = []
        self._committed = 1.0
        self._expected = 1.0

    def acceptance(self, band: int, *, greedy: bool) -> float:
        reached, accepted = self._counts[greedy]
        midpoint = (band + 0.5) / BANDS
        return (accepted[band] + PRIOR_WEIGHT * midpoint) / (reached[band] + PRIOR_WEIGHT)

    def start_cycle(self, *, greedy: bool) -> None:
        """A cycle of a greedy (or a sampling) request starts drafting."""
        self._greedy = greedy
        self._bands = []
        self._committed = 1.0
        self._expected = 1.0

    def keeps_drafting(self, confidence: float, cost_ratio: float) -> bool:
        """Whether to draft a token the head gives ``confidence``; ``cost_ratio`` is c."""
        band = band_of(confidence)
        committed = self._committed * self.acceptance(band, greedy=self._greedy)
        c = cost_ratio if cost_ratio > 0 else FALLBACK_COST_RATIO
        if committed / c < self._expected / (1.0 + len(self._bands) * c):
            return False
        self._bands.append(band)
        self._committed = committed
        self._expected += committed
        return True

    def learn(self, accepted: int) -> None:
        """The verify kept the first ``accepted`` drafts of this cycle."""
        reached, kept = self._counts[self._greedy]
        for index, band in enumerate(self._bands[: accepted + 1]):
            reached[band] += 1
            kept[band] += index < accepted
