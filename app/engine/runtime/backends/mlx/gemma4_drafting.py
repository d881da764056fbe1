"""Gemma 4's separate drafter as the MLX backend's :class:`~.drafting.Drafting`.

The drafter (:mod:`~app.engine.runtime.backends.mlx.gemma4_drafter`) reads the target's mlx-lm
cache and keeps nothing of its own (docs/drafters.md#the-mlx-drafter), so rows handed over are
ignored and rolling back is the trunk's trim. A draft is ``depth`` steps at the **same** position
— the one the newest token takes — step 1 fed the target's scaled embedding of the newest token
and the target's hidden state before it, step k > 1 the embedding of d_{k−1} and the drafter's
own carried state, each attending to the target's keys and values of earlier positions only.

mlx-lm gives Gemma 4's sliding-window layers a rotating buffer of the window's size, which
cannot be cut back once it has wrapped; a rejected draft must be cut back. So a target that
drafts with this drafter keeps its sliding-window layers un-rotated (:func:`unrotated_caches`:
plain ``KVCache``s holding every position of the context used, masked to the window by mlx-lm's
own mask) — every rollback and every prefix reuse is then a trim, as for full attention.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.cache import KVCache, RotatingKVCache

from app.engine.runtime.backends.mlx.drafting import Drafting, DraftSteps
from app.engine.runtime.backends.mlx.gemma4_drafter import (
    Gemma4Drafter,
    TargetKv,
    target_embeddings,
    target_kv,
)
from app.engine.runtime.backends.mlx.kept_states import Conversation


def unrotated_caches(caches: list[Any]) -> list[Any]:
    """mlx-lm's caches with every rotating sliding-window buffer replaced by a plain KV cache."""
    return [KVCache() if isinstance(cache, RotatingKVCache) else cache for cache in caches]


class Gemma4Drafting(Drafting):
    """``drafter`` drafting for ``target`` (the mlx-lm Gemma 4 text model whose caches and
    embedding table it reads)."""

    keeps_rows = False

    def __init__(self, drafter: Gemma4Drafter, target: nn.Module) -> None:
        self.drafter = drafter
        self._target = target

    def clear(self) -> None:
        """Nothing held."""

    def resume(self, conversation: Conversation, rows: int) -> None:
        """Nothing to cut: the trunk's cache is the drafter's."""

    def prompt_rows(self, tokens: Sequence[int], hidden: mx.array, live: Conversation) -> None:
        """Nothing to run: the prompt filled the trunk's cache, which the drafter reads."""

    def arrays(self, conversation: Conversation) -> list[mx.array]:
        return []

    def commit_row(self, token: int, hidden_before: mx.array) -> None:
        """Nothing to keep: a draft needs only the newest hidden state, which it is given."""

    def commit_rows(
        self,
        live: Conversation,
        start: int,
        tokens: Sequence[int],
        hidden_before: mx.array,
        hidden: mx.array,
    ) -> None:
        """Nothing to keep (see :meth:`commit_row`)."""

    def keep_matching(self, live: Conversation, shared: int) -> None:
        """Nothing held."""

    def without_draft(self, live: Conversation) -> None:
        """Nothing held."""

    def steps(self, live: Conversation, hidden_last: mx.array) -> DraftSteps:
        kv = target_kv(self._target, live.trunk)
        return _Gemma4Steps(self.drafter, self._target, kv, len(live.tokens), hidden_last)


class _Gemma4Steps(DraftSteps):
    """Every step at the newest token's position, fed the previous step's carried state."""

    def __init__(
        self,
        drafter: Gemma4Drafter,
        target: nn.Module,
        kv: dict[str, TargetKv],
        position: int,
        hidden_last: mx.array,
    ) -> None:
        self._drafter, self._target, self._kv = drafter, target, kv
        self._position = position
        self._previous = hidden_last[None, None, :]

    def logits(self, token: int) -> mx.array:
        embedded = target_embeddings(self._target, mx.array([[token]]))
        logits, self._previous = self._drafter.step(
            embedded, self._previous, self._position, self._kv
        )
        return logits

    def close(self) -> None:
        """Nothing to drop: the steps wrote into no cache."""
