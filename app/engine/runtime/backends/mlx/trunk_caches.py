"""The trunk's mlx-lm caches as the MLX backend moves them: snapshot, restore, trim, fork.

A trunk has one cache per layer: a ``KVCache`` (attention; trims by offset) or an
``ArraysCache`` (gated-delta-net conv window and recurrent state; cannot be trimmed, so it is
set from arrays kept earlier — mlx arrays are immutable, so keeping the references is the
snapshot). Verify, rollback and prefix reuse all need these few moves; here they are once.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import ArraysCache, KVCache

from app.engine.runtime.backends.mlx.kept_states import cache_arrays
from app.engine.runtime.backends.mlx.verify_states import Capture

RecurrentArrays = tuple[tuple[mx.array | None, ...], ...]
"""The arrays of every ``ArraysCache`` of a trunk, in cache order."""


def is_recurrent(cache: Any) -> bool:
    return isinstance(cache, ArraysCache)


def is_kv(cache: Any) -> bool:
    return isinstance(cache, KVCache)


def recurrent_arrays(trunk: list[Any]) -> RecurrentArrays:
    return tuple(tuple(cache.cache) for cache in trunk if is_recurrent(cache))


def set_recurrent(trunk: list[Any], arrays: RecurrentArrays) -> None:
    """Set each ``ArraysCache`` from ``arrays`` (empty: clear them, a state before any token)."""
    kept = iter(arrays)
    for cache in trunk:
        if is_recurrent(cache):
            saved = next(kept, None)
            cache.cache = list(saved) if saved is not None else [None] * len(cache.cache)


def trim_kv(trunk: list[Any], position: int) -> None:
    """Cut every ``KVCache`` back to ``position`` tokens."""
    for cache in trunk:
        if is_kv(cache):
            cache.trim(cache.offset - position)


def snapshot(trunk: list[Any]) -> list[Any]:
    """Per cache: its arrays (recurrent state) or its offset (KV)."""
    return [list(cache.cache) if is_recurrent(cache) else cache.offset for cache in trunk]


def restore(trunk: list[Any], taken: list[Any], length: int) -> None:
    """Put a :func:`snapshot` taken at ``length`` tokens back."""
    for cache, saved in zip(trunk, taken, strict=True):
        if is_recurrent(cache):
            cache.cache = list(saved)
        else:
            cache.trim(cache.offset - saved)
    assert all(saved == length for saved in taken if isinstance(saved, int)), (
        "KV cache offsets out of step with the committed length"
    )


def keep_captured(trunk: list[Any], capture: Capture, accepted: int, dropped: int) -> None:
    """The trunk as after the first ``accepted`` + 1 verified tokens: each recurrent layer
    from its captured state, each KV cache trimmed by ``dropped``."""
    layers = iter(capture.layers)
    for cache in trunk:
        if is_recurrent(cache):
            cache.cache = list(next(layers)[accepted])
        else:
            cache.trim(dropped)


def cache_state(trunk: list[Any]) -> list[mx.array]:
    """Every array the trunk's caches hold (what ``mx.eval`` must compute after a pass)."""
    return [
        array
        for cache in trunk
        for array in (cache.cache if is_recurrent(cache) else cache_arrays(cache))
        if array is not None
    ]


def copy_kv(source: Any, target: Any, length: int) -> None:
    """``target`` (an empty mlx-lm ``KVCache``) holds the first ``length`` rows of ``source`` in
    new arrays: KVCache writes into its buffers in place, so the two must not share them."""
    target.keys = source.keys[..., :length, :]
    target.values = source.values[..., :length, :]
    target.offset = length
