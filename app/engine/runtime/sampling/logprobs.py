"""Token log-probabilities: what a reply reports about each token it chose, when asked.

The distribution reported is the **model's own**: the log-softmax of the raw logits row that
chose the token — before temperature, top-k/top-p/min-p, a grammar's mask and end-token
suppression — as vLLM reports by default (its ``raw_logprobs``). So the figures describe the
model, not the sampler settings, and the same token at the same place gets the same figure
whatever the request's temperature.

Under speculative decoding the row is the target's verify row for the token's position — never
the MTP head's draft row — so a speculative reply reports what plain decoding of the same tokens
reports (``tests/runtime/test_logprobs.py``). Rows are read only when a request asks
(:attr:`GenerationRequest.logprobs`): one pass over the row (its maximum, the float64 sum of the
float32 exponentials) and, for the alternatives, the sampler's top-k search (a bound from a
strided sample, then only the few tokens reaching it are ordered).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from app.engine.runtime.sampling.candidates import top_k_ids

MAX_TOP_LOGPROBS = 20
"""The most alternatives a request may ask for per token (OpenAI's limit)."""


@dataclass(frozen=True)
class TopLogprob:
    """One of the likeliest tokens at a position: its id, its bytes (empty for a special token),
    its log-probability, and its text as shown to a person (a special token's own name, such as
    ``<|im_end|>``, so alternatives that are special tokens stay told apart)."""

    token: int
    piece: bytes
    logprob: float
    text: str


@dataclass(frozen=True)
class TokenLogprob:
    """The chosen token at a position, its log-probability, and the ``top`` likeliest tokens
    there (most likely first; lower id first on ties)."""

    token: int
    piece: bytes
    logprob: float
    text: str
    top: tuple[TopLogprob, ...] = ()


class LogprobReader:
    """Reads :class:`TokenLogprob` entries from logits rows, with ``top`` alternatives each;
    ``piece`` gives a token's bytes and ``text`` its text as shown (the backend's
    ``token_bytes`` and ``token_text``)."""

    def __init__(self, piece: Callable[[int], bytes], text: Callable[[int], str], top: int) -> None:
        self._piece = piece
        self._text = text
        self._top = top

    def read(self, row: np.ndarray, token: int) -> TokenLogprob:
        """The entry for ``token`` chosen at the position whose raw logits are ``row``."""
        norm = log_normaliser(row)
        top: tuple[TopLogprob, ...] = ()
        if self._top:
            ids = likeliest(row, self._top)
            values = (row[ids].astype(np.float64) - norm).tolist()
            piece, text = self._piece, self._text
            top = tuple(
                TopLogprob(index, piece(index), value, text(index))
                for index, value in zip(ids.tolist(), values, strict=True)
            )
        return TokenLogprob(
            token, self._piece(token), float(row[token]) - norm, self._text(token), top
        )


def log_normaliser(row: np.ndarray) -> float:
    """log Σ exp(row): the row's maximum plus the log of the float64 sum of the float32
    exponentials below it (exact to ~1e-7, and a 262k-token row stays cheap)."""
    peak = float(np.max(row))
    total = np.exp(row - np.float32(peak), dtype=np.float32).sum(dtype=np.float64)
    return peak + math.log(float(total))


def likeliest(row: np.ndarray, count: int) -> np.ndarray:
    """The ``count`` largest entries' ids, largest first, the lower id first on ties (found
    with the sampler's bound instead of a selection over the whole row: :mod:`.candidates`)."""
    ids = top_k_ids(row, min(count, row.shape[0]))
    return ids[np.lexsort((ids, -row[ids].astype(np.float64)))][:count]
