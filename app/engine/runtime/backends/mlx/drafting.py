"""What drafts on the MLX backend: the small interface the backend holds a drafter by, and the
model's own MTP head as one.

Two drafters implement :class:`Drafting`: :class:`HeadDrafter` (an MTP head built from a sidecar or
the folder's own ``mtp.*`` tensors, with a KV cache of its own) and
:class:`~app.engine.runtime.backends.mlx.gemma4_drafting.Gemma4Drafting` (Gemma 4's separate
drafter model, which reads the target's cache and keeps nothing of its own; docs/drafters.md).
The draft loop — each token chosen from the step's logits, until the depth or a stop — is
:meth:`Drafting.draft`'s, for both; a drafter supplies its steps (:class:`DraftSteps`). Every
call names the conversation it works on (``Conversation.head`` is the head's cache,
``Conversation.trunk`` the target's).

Head rows follow the llama.cpp backend's convention: the row for position p carries token x_p and
the trunk's hidden state h_{p−1}. Rows for tokens a verify commits (or a plain step after a
prefill with the head) are queued and run with the next cycle's first draft row. The head's KV
cache holds rows 1..offset.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import mlx.core as mx
import numpy as np

from app.engine.runtime.backends.mlx.heads import MtpHead
from app.engine.runtime.backends.mlx.kept_states import Conversation
from app.engine.runtime.core.backend import STOP_DRAFTING, DraftChooser, DraftResult


class DraftSteps(ABC):
    """One draft's steps: the logits of each next draft token."""

    @abstractmethod
    def logits(self, token: int) -> mx.array:
        """Logits (1 × rows × vocabulary, the last row the next draft's) after ``token``: the
        newest committed token at the first step, the draft chosen before it later."""

    @abstractmethod
    def close(self) -> None:
        """Drop what the draft's steps left in the conversation's caches."""


class Drafting(ABC):
    """Proposes drafts for the live conversation and keeps in step with its trunk."""

    keeps_rows: bool
    """Whether it holds rows of its own (a head cache per conversation) that must cover the
    tokens a prompt resumes after; False: it reads only the trunk's state."""

    @abstractmethod
    def clear(self) -> None:
        """Forget rows handed over and not yet run."""

    @abstractmethod
    def resume(self, conversation: Conversation, rows: int) -> None:
        """A prompt resumes ``conversation`` with its drafter rows 1..``rows`` still right."""

    @abstractmethod
    def prompt_rows(self, tokens: Sequence[int], hidden: mx.array, live: Conversation) -> None:
        """A prompt chunk's rows (``hidden``: 1 × rows × width), run now (not evaluated)."""

    @abstractmethod
    def arrays(self, conversation: Conversation) -> list[mx.array]:
        """What the prompt rows computed, to evaluate with the trunk's chunk."""

    @abstractmethod
    def commit_row(self, token: int, hidden_before: mx.array) -> None:
        """A plain step's row (token and h before it)."""

    @abstractmethod
    def commit_rows(
        self,
        live: Conversation,
        start: int,
        tokens: Sequence[int],
        hidden_before: mx.array,
        hidden: mx.array,
    ) -> None:
        """Rows of the committed ``tokens`` of a verify from ``start`` (h_{start−1} is
        ``hidden_before``, then ``hidden``'s rows)."""

    @abstractmethod
    def keep_matching(self, live: Conversation, shared: int) -> None:
        """A new prompt shares ``shared`` tokens with the conversation: keep what it repeats."""

    @abstractmethod
    def without_draft(self, live: Conversation) -> None:
        """A cycle asked for no draft: bring its own rows up to date."""

    @abstractmethod
    def steps(self, live: Conversation, hidden_last: mx.array) -> DraftSteps:
        """The steps of a draft after the newest committed token (at position
        ``len(live.tokens)``, paired with h of the position before, ``hidden_last``)."""

    def draft(
        self,
        live: Conversation,
        last_token: int,
        hidden_last: mx.array,
        depth: int,
        choose: DraftChooser,
    ) -> DraftResult:
        """Up to ``depth`` drafts after ``last_token`` (at position ``len(live.tokens)``, paired
        with h of the position before, ``hidden_last``); ``choose`` picks each or stops."""
        if depth == 0:
            self.without_draft(live)
            return DraftResult(())
        steps = self.steps(live, hidden_last)
        drafts: list[int] = []
        token = last_token
        for index in range(depth):
            token = choose(index, np.array(steps.logits(token)[0, -1].astype(mx.float32)))
            if token == STOP_DRAFTING:
                break
            drafts.append(token)
        steps.close()
        return DraftResult(tuple(drafts))


class HeadDrafter(Drafting):
    """``head`` with the rows handed over since it last ran."""

    keeps_rows = True

    def __init__(self, head: MtpHead) -> None:
        self.head = head
        self._queue_tokens: list[int] = []
        self._queue_hidden: list[mx.array] = []

    def clear(self) -> None:
        self._queue_tokens, self._queue_hidden = [], []

    def resume(self, conversation: Conversation, rows: int) -> None:
        head = conversation.head
        head.trim(head.offset - rows)

    def prompt_rows(self, tokens: Sequence[int], hidden: mx.array, live: Conversation) -> None:
        self.head.step(mx.array([tokens]), hidden, live.head)

    def arrays(self, conversation: Conversation) -> list[mx.array]:
        return conversation.head.state

    def commit_row(self, token: int, hidden_before: mx.array) -> None:
        self._queue_tokens.append(token)
        self._queue_hidden.append(hidden_before)

    def commit_rows(
        self,
        live: Conversation,
        start: int,
        tokens: Sequence[int],
        hidden_before: mx.array,
        hidden: mx.array,
    ) -> None:
        """Skips the rows the head holds or has queued."""
        cache = live.head
        held = (cache.offset + 1 if cache is not None else 0) + len(self._queue_tokens)
        for position in range(max(held, start), start + len(tokens)):
            offset = position - start
            self._queue_tokens.append(tokens[offset])
            self._queue_hidden.append(hidden_before if offset == 0 else hidden[offset - 1])

    def keep_matching(self, live: Conversation, shared: int) -> None:
        """Run the queued rows the new prompt repeats, drop the others."""
        if self._queue_tokens:
            valid = max(0, min(len(self._queue_tokens), shared - live.head.offset - 1))
            del self._queue_tokens[valid:], self._queue_hidden[valid:]
            self._run_queue(live.head)

    def _run_queue(self, cache: object) -> None:
        if self._queue_tokens:
            self.head.step(
                mx.array([self._queue_tokens]), mx.stack(self._queue_hidden)[None], cache
            )
            mx.eval(cache.state)
            self.clear()

    def without_draft(self, live: Conversation) -> None:
        self._run_queue(live.head)

    def steps(self, live: Conversation, hidden_last: mx.array) -> DraftSteps:
        """The first step runs the queued rows with the newest token's."""
        queued, hidden = (*self._queue_tokens,), [*self._queue_hidden, hidden_last]
        steps = _HeadSteps(self.head, live, queued, hidden)
        self.clear()
        return steps


class _HeadSteps(DraftSteps):
    """The head's draft: it keeps the row of the newest token and drops the drafts' rows."""

    def __init__(
        self, head: MtpHead, live: Conversation, queued: tuple[int, ...], hidden: list[mx.array]
    ) -> None:
        self._head = head
        self._cache, self._committed = live.head, len(live.tokens)
        self._queued = queued
        self._hidden = mx.stack(hidden)[None]

    def logits(self, token: int) -> mx.array:
        tokens = [*self._queued, token]
        self._queued = ()
        carried, logits = self._head.step(mx.array([tokens]), self._hidden, self._cache)
        self._hidden = carried[:, -1:, :]
        return logits

    def close(self) -> None:
        self._cache.trim(self._cache.offset - self._committed)
