"""The states the MLX backend keeps between requests, bounded by one memory budget.

Every chat turn re-sends the whole conversation; recomputing it from position 0 costs seconds
on a real model. The backend keeps its *live* conversation (the caches the previous request
left and the tokens they stand for) plus, here, two kinds of kept state that share one
least-recently-used order bounded by ``LoadSettings.state_cache_mib``:

- **checkpoints** inside a conversation: the trunk's recurrent (gated-delta-net) arrays after
  ``position`` tokens and the post-norm hidden state h_{position−1} the MTP head pairs with the
  next token. Recurrent state cannot be rewound, so a prompt that diverges from a conversation
  resumes from its nearest checkpoint at or before the divergence; the attention KV caches need
  nothing kept, they trim by offset. mlx arrays are immutable and mlx-lm's gated-delta layers
  assign new arrays to their ``ArraysCache`` slots, so keeping the references is the snapshot.
- **saved conversations**: a whole conversation (its caches, its head cache, its checkpoints)
  kept when another conversation took the model. Evicting one forgets its checkpoints too (they
  need its KV caches).

Bytes are counted from the arrays' ``nbytes`` (a KV cache's whole allocated buffer), each array
once however many kept states share it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
from mlx.utils import tree_flatten

_WHOLE = -1
"""The position key of a saved conversation's whole state in the LRU order."""


@dataclass(frozen=True)
class Checkpoint:
    """The trunk's recurrent arrays after ``position`` tokens (one tuple per ``ArraysCache``, in
    cache order) and h_{position−1}, the hidden state the head pairs with token ``position``."""

    position: int
    recurrent: tuple[tuple[mx.array | None, ...], ...]
    hidden: mx.array | None

    def arrays(self) -> list[mx.array]:
        arrays = [array for layer in self.recurrent for array in layer if array is not None]
        return arrays if self.hidden is None else [*arrays, self.hidden]


@dataclass(eq=False)
class Conversation:
    """One token history and the caches holding it: ``trunk`` (mlx-lm caches) holds ``tokens``;
    ``head`` (the MTP head's KV cache, or None) holds rows for positions 1..head.offset;
    ``hidden_last`` is h_{len(tokens)−1}."""

    ident: int
    tokens: list[int]
    trunk: list[Any]
    head: Any | None
    hidden_last: mx.array | None = None
    arrays: list[mx.array] = field(default_factory=list)
    """Filled when the conversation is saved: what it holds, for the byte count."""


def cache_arrays(cache: Any) -> list[mx.array]:
    """The arrays an mlx-lm cache holds (a KV cache's whole buffers, not the used part)."""
    return [value for _, value in tree_flatten(cache.state) if isinstance(value, mx.array)]


class KeptStates:
    """Checkpoints and saved conversations in one LRU order bounded by ``budget_bytes``."""

    def __init__(self, budget_bytes: int) -> None:
        self._budget = budget_bytes
        self._entries: OrderedDict[tuple[int, int], list[mx.array]] = OrderedDict()
        self._checkpoints: dict[int, dict[int, Checkpoint]] = {}
        self._saved: dict[int, Conversation] = {}

    @property
    def nbytes(self) -> int:
        return _distinct_bytes(array for arrays in self._entries.values() for array in arrays)

    def clear(self) -> None:
        self._entries.clear()
        self._checkpoints.clear()
        self._saved.clear()

    # --- checkpoints ------------------------------------------------------------------------

    def checkpoints(self, ident: int) -> list[Checkpoint]:
        """The checkpoints kept for conversation ``ident``, by position."""
        return sorted(self._checkpoints.get(ident, {}).values(), key=lambda c: c.position)

    def add_checkpoint(self, ident: int, checkpoint: Checkpoint) -> None:
        """Keep ``checkpoint`` (replacing one at the same position) unless it alone exceeds the
        budget; evict least recently used states until the total fits."""
        arrays = checkpoint.arrays()
        if _distinct_bytes(arrays) > self._budget:
            return
        key = (ident, checkpoint.position)
        self._entries[key] = arrays
        self._entries.move_to_end(key)
        self._checkpoints.setdefault(ident, {})[checkpoint.position] = checkpoint
        self._fit()

    def touch(self, ident: int, position: int) -> None:
        """Mark a checkpoint (or with ``position`` −1 a saved conversation) as just used."""
        if (ident, position) in self._entries:
            self._entries.move_to_end((ident, position))

    def forget_checkpoints_after(self, ident: int, position: int) -> None:
        """Drop the checkpoints of ``ident`` past ``position`` (their tokens changed)."""
        for kept in [p for p in self._checkpoints.get(ident, {}) if p > position]:
            del self._checkpoints[ident][kept]
            del self._entries[(ident, kept)]

    def share_checkpoints(self, source: int, target: int, upto: int) -> None:
        """Conversation ``target`` starts with the first ``upto`` tokens of ``source``: their
        checkpoints at or before ``upto`` hold for it too (the same arrays, counted once)."""
        for checkpoint in self.checkpoints(source):
            if checkpoint.position <= upto:
                key = (target, checkpoint.position)
                self._entries[key] = checkpoint.arrays()
                self._checkpoints.setdefault(target, {})[checkpoint.position] = checkpoint

    # --- saved conversations ----------------------------------------------------------------

    def saved(self) -> list[Conversation]:
        """Saved conversations, most recently used first."""
        order = [ident for ident, position in reversed(self._entries) if position == _WHOLE]
        return [self._saved[ident] for ident in order]

    def save(self, conversation: Conversation) -> None:
        """Keep ``conversation`` whole (it must no longer be written to) unless it alone exceeds
        the budget, in which case it and its checkpoints are forgotten."""
        head = [] if conversation.head is None else cache_arrays(conversation.head)
        hidden = [] if conversation.hidden_last is None else [conversation.hidden_last]
        conversation.arrays = [
            *(array for cache in conversation.trunk for array in cache_arrays(cache)),
            *head,
            *hidden,
        ]
        own = [conversation.arrays, *(c.arrays() for c in self.checkpoints(conversation.ident))]
        if _distinct_bytes(array for arrays in own for array in arrays) > self._budget:
            self.forget(conversation.ident)
            return
        self._saved[conversation.ident] = conversation
        self._entries[(conversation.ident, _WHOLE)] = conversation.arrays
        self._fit()

    def take(self, ident: int) -> Conversation:
        """Remove a saved conversation to make it live again; its checkpoints stay kept."""
        del self._entries[(ident, _WHOLE)]
        return self._saved.pop(ident)

    def forget(self, ident: int) -> None:
        """Drop conversation ``ident``: its saved state and its checkpoints."""
        self._saved.pop(ident, None)
        self._entries.pop((ident, _WHOLE), None)
        for position in self._checkpoints.pop(ident, {}):
            del self._entries[(ident, position)]

    def _fit(self) -> None:
        while self._entries and self.nbytes > self._budget:
            (ident, position), _ = self._entries.popitem(last=False)
            if position == _WHOLE:
                del self._saved[ident]
                self.forget(ident)
            else:
                del self._checkpoints[ident][position]


def _distinct_bytes(arrays: Iterable[mx.array]) -> int:
    seen: dict[int, int] = {}
    for array in arrays:
        seen[id(array)] = array.nbytes
    return sum(seen.values())
