"""The penalties of one request: what the tokens so far do to the next token's logits.

Which tokens count (docs/architecture.md#penalties-and-logit-bias):

- **repetition penalty** (``repetition_penalty``, llama.cpp's ``repeat_penalty``): the tokens of
  the last :attr:`~.SamplerSettings.penalty_window` tokens of the prompt and the reply together,
  as llama-server counts them (it feeds the prompt to its sampler before the reply; window 64 by
  default). A logit ≤ 0 is multiplied by the factor, one > 0 divided by it (Hugging Face's and
  llama.cpp's rule).
- **presence and frequency penalties** (OpenAI's): the tokens of the reply so far, however long;
  a token's logit loses count × frequency + presence.
- **logit bias**: fixed per request, added to the listed ids; −100 or less bans the token.

Speculative decoding changes the history inside a cycle: the distribution of draft position i
must count the drafts before it, for the head's q_i while drafting and for the target's p_i when
verifying. The cycle pushes each draft as it is chosen, takes the edits of every position once
(the same edits serve q_i and p_i), and pops the drafts again before pushing what was committed,
so Leviathan–Chen acceptance compares distributions that were shaped alike.

Only tokens that occurred are edited (:mod:`.logit_edits`); a request without penalties or bias
has no edits and costs nothing per token.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.sampling.logit_edits import LogitEdits
from app.engine.runtime.sampling.sampler import BANNING_BIAS, SamplerSettings


class Penalties:
    """The counts the penalties read, kept as tokens are pushed (committed or drafted) and
    popped (drafts rolled back), and the edits they make to the next row.

    The edits' arrays are kept up to date token by token — a push or pop changes one or two
    entries (a token seen for the first time is inserted; one whose counts fall to zero keeps
    an entry that changes nothing) — and copied once per row that asks for them, since a
    cycle's earlier rows keep theirs.
    """

    def __init__(self, settings: SamplerSettings, prompt: Sequence[int], vocab_size: int) -> None:
        self._factor = settings.repetition_penalty
        self._window = settings.penalty_window if self._factor != 1.0 else 0
        self._frequency = settings.frequency_penalty
        self._presence = settings.presence_penalty
        self._counts_reply = self._frequency != 0.0 or self._presence != 0.0
        bias = dict(_checked_bias(settings.logit_bias, vocab_size))
        self.active = bool(self._window or self._counts_reply or bias)
        self._ids = np.array(sorted(bias), dtype=np.int64)
        self._bias = np.array([bias[token] for token in sorted(bias)], dtype=np.float64)
        self._repeat = np.ones(self._ids.size)
        self._subtract = np.zeros(self._ids.size)
        self._history: list[int] = []  # the prompt's last tokens (for the window), the reply
        self._in_window: Counter[int] = Counter()
        self._in_reply: Counter[int] = Counter()
        self._edits: LogitEdits | None = None
        if self._window:  # images in the prompt stand as negative pseudo-ids
            self._history = [token for token in prompt if 0 <= token < vocab_size]
            del self._history[: -self._window]
            for token in self._history:
                self._count_in_window(token, 1)

    def push(self, token: int) -> None:
        """A token joins the history (committed, or drafted in the current cycle)."""
        if not self.active:
            return
        self._history.append(token)
        if self._window:
            self._count_in_window(token, 1)
            if len(self._history) > self._window:  # the oldest leaves the window
                self._count_in_window(self._history[-self._window - 1], -1)
        if self._counts_reply:
            self._count_in_reply(token, 1)
        self._edits = None

    def push_all(self, tokens: Iterable[int]) -> None:
        for token in tokens:
            self.push(token)

    def pop(self, count: int) -> None:
        """Take the last ``count`` pushed tokens back out (rejected drafts)."""
        if not self.active or count == 0:
            return
        for _ in range(count):
            token = self._history.pop()
            if self._window:
                self._count_in_window(token, -1)
                if len(self._history) >= self._window:  # the oldest comes back into the window
                    self._count_in_window(self._history[-self._window], 1)
            if self._counts_reply:
                self._count_in_reply(token, -1)
        self._edits = None

    def edits(self) -> LogitEdits | None:
        """The edits of the next row (None when the request has no penalties and no bias)."""
        if not self.active:
            return None
        if self._edits is None:
            self._edits = LogitEdits(
                self._ids.copy(), self._bias.copy(), self._repeat.copy(), self._subtract.copy()
            )
        return self._edits

    def _count_in_window(self, token: int, change: int) -> None:
        count = self._in_window[token] + change
        self._in_window[token] = count
        if count == (1 if change > 0 else 0):  # the token came into or left the window
            index = self._entry(token)  # before the array is read: it may grow
            self._repeat[index] = self._factor if count else 1.0

    def _count_in_reply(self, token: int, change: int) -> None:
        count = self._in_reply[token] + change
        self._in_reply[token] = count
        index = self._entry(token)
        self._subtract[index] = count * self._frequency + self._presence if count else 0.0

    def _entry(self, token: int) -> int:
        """The index of ``token`` in the edits' arrays, inserted (changing nothing) if new."""
        index = int(np.searchsorted(self._ids, token))
        if index == self._ids.size or self._ids[index] != token:
            self._ids = np.insert(self._ids, index, token)
            self._bias = np.insert(self._bias, index, 0.0)
            self._repeat = np.insert(self._repeat, index, 1.0)
            self._subtract = np.insert(self._subtract, index, 0.0)
        return index


def _checked_bias(
    bias: Iterable[tuple[int, float]], vocab_size: int
) -> Iterable[tuple[int, float]]:
    """The request's biases, each id checked against the vocabulary; a bias of
    :data:`BANNING_BIAS` or less bans the token (−infinity)."""
    for token, value in bias:
        if not 0 <= token < vocab_size:
            raise RuntimeBackendError(
                f"logit_bias names token {token}, but the model's vocabulary has {vocab_size} "
                f"tokens (ids 0 to {vocab_size - 1}); use the model's own token ids"
            )
        yield token, (-np.inf if value <= BANNING_BIAS else value)
