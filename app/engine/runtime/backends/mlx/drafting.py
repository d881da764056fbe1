"""The MLX backend's MTP head as a drafter: its queue of committed rows and its draft loop.

Head rows follow the llama.cpp backend's convention: the row for position p carries token x_p
and the trunk's hidden state h_{p−1}. Rows for tokens a verify commits (or a plain step after a
prefill with the head) are queued and run with the next cycle's first draft row. The head's KV
cache belongs to a conversation (``Conversation.head``, rows 1..offset), so every call names the
cache it works on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mlx.core as mx
import numpy as np

from app.engine.runtime.backends.mlx.heads import MtpHead
from app.engine.runtime.core.backend import STOP_DRAFTING, DraftChooser, DraftResult


class HeadDrafter:
    """``head`` with the rows handed over since it last ran."""

    def __init__(self, head: MtpHead) -> None:
        self.head = head
        self._queue_tokens: list[int] = []
        self._queue_hidden: list[mx.array] = []

    def clear(self) -> None:
        self._queue_tokens, self._queue_hidden = [], []

    def prompt_rows(self, tokens: Sequence[int], hidden: mx.array, cache: Any) -> None:
        """A prompt chunk's rows (``hidden``: 1 × rows × width), run now (not evaluated)."""
        self.head.step(mx.array([tokens]), hidden, cache)

    def commit_row(self, token: int, hidden_before: mx.array) -> None:
        """A plain step's row, run with the next draft."""
        self._queue_tokens.append(token)
        self._queue_hidden.append(hidden_before)

    def commit_rows(
        self,
        cache: Any,
        start: int,
        tokens: Sequence[int],
        hidden_before: mx.array,
        hidden: mx.array,
    ) -> None:
        """Rows of the committed ``tokens`` of a verify from ``start`` (h_{start−1} is
        ``hidden_before``, then ``hidden``'s rows), skipping those the head holds or has queued."""
        held = (cache.offset + 1 if cache is not None else 0) + len(self._queue_tokens)
        for position in range(max(held, start), start + len(tokens)):
            offset = position - start
            self._queue_tokens.append(tokens[offset])
            self._queue_hidden.append(hidden_before if offset == 0 else hidden[offset - 1])

    def keep_matching(self, cache: Any, shared: int) -> None:
        """A new prompt shares ``shared`` tokens with the conversation: run the queued rows it
        repeats, drop the others."""
        if self._queue_tokens:
            valid = max(0, min(len(self._queue_tokens), shared - cache.offset - 1))
            del self._queue_tokens[valid:], self._queue_hidden[valid:]
            self.run_queue(cache)

    def run_queue(self, cache: Any) -> None:
        if self._queue_tokens:
            self.head.step(
                mx.array([self._queue_tokens]), mx.stack(self._queue_hidden)[None], cache
            )
            mx.eval(cache.state)
            self.clear()

    def draft(
        self,
        cache: Any,
        last_token: int,
        hidden_last: mx.array,
        committed: int,
        depth: int,
        choose: DraftChooser,
    ) -> DraftResult:
        """Up to ``depth`` drafts after ``last_token`` (the trunk holds ``committed`` tokens);
        the head keeps the row of ``last_token`` and drops the drafts' rows."""
        if depth == 0:
            self.run_queue(cache)
            return DraftResult(())
        tokens = [*self._queue_tokens, last_token]
        hidden = mx.stack([*self._queue_hidden, hidden_last])[None]
        self.clear()
        drafts: list[int] = []
        for index in range(depth):
            carried, logits = self.head.step(mx.array([tokens]), hidden, cache)
            token = choose(index, np.array(logits[0, -1].astype(mx.float32)))
            if token == STOP_DRAFTING:
                break
            drafts.append(token)
            tokens, hidden = [token], carried[:, -1:, :]
        cache.trim(cache.offset - committed)
        return DraftResult(tuple(drafts))
