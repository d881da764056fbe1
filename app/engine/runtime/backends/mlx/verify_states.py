"""Per-token recurrent states inside a verify, so a partial accept needs no second trunk pass.

A verify runs [last, d_1..d_K] through the trunk in one batch. Attention KV caches trim by
offset after a partial accept, but mlx-lm's gated-delta-net layer leaves only the conv window
and recurrent state after the whole batch, so without help the backend restores the state from
before the verify and re-runs the accepted tokens. Here each gated-delta-net layer (qwen3_5,
qwen3_5_moe and qwen3_next share it) is wrapped at load; while a :class:`Capture` is open, the
wrapper computes the layer as mlx-lm does — projections, causal conv, gated norm and output
projection over the whole batch — but runs the recurrence one token at a time through mlx-lm's
own ``gated_delta_update`` (the Metal kernel or the ops path, as a plain decoding step runs it)
and keeps the conv window and recurrent state after every token. After accepting k drafts the
backend sets each layer's cache from entry k (references: mlx arrays are immutable).

The recurrence for K+1 tokens costs K+1 small calls per layer instead of one; the states kept
are K+1 recurrent states per layer until the rollback (what llama.cpp keeps for the same
purpose). With a capture closed, or a cache in batch mode, the wrapper is mlx-lm's layer.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.gated_delta import gated_delta_update, normalize_qk

WRAPPED_LAYERS = ("GatedDeltaNet", "Qwen3NextGatedDeltaNet")
"""mlx-lm's gated-delta-net classes whose forward :class:`CapturingGatedDeltaNet` mirrors."""


class Capture:
    """The (conv window, recurrent state) after each verified token, per gated-delta-net layer
    in the order the trunk runs them (the order of its ``ArraysCache`` entries)."""

    def __init__(self) -> None:
        self.layers: list[list[tuple[mx.array, mx.array]]] = []

    def arrays(self) -> list[mx.array]:
        return [array for layer in self.layers for pair in layer for array in pair]


class CapturingGatedDeltaNet(nn.Module):
    """mlx-lm's gated-delta-net layer, keeping per-token states while ``capture`` is set."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.capture: Capture | None = None

    def __call__(
        self, inputs: mx.array, mask: mx.array | None = None, cache: Any | None = None
    ) -> mx.array:
        layer = self.inner
        if (
            self.capture is None
            or cache is None
            or mask is not None
            or cache.lengths is not None
            or getattr(layer, "sharding_group", None) is not None
        ):
            return layer(inputs, mask, cache)
        batch, length, _ = inputs.shape
        mixed, z, b, a = _projections(layer, inputs)
        window = layer.conv_kernel_size - 1
        conv_state = cache[0]
        if conv_state is None:
            conv_state = mx.zeros((batch, window, layer.conv_dim), dtype=inputs.dtype)
        conv_input = mx.concatenate([conv_state, mixed], axis=1)
        conv_out = nn.silu(layer.conv1d(conv_input))
        q, k, v = [
            part.reshape(batch, length, heads, size)
            for part, heads, size in zip(
                mx.split(conv_out, [layer.key_dim, 2 * layer.key_dim], -1),
                [layer.num_k_heads, layer.num_k_heads, layer.num_v_heads],
                [layer.head_k_dim, layer.head_k_dim, layer.head_v_dim],
                strict=True,
            )
        ]
        q, k = normalize_qk(q, k, inv_scale=layer.head_k_dim**-0.5, eps=1e-6)
        state = cache[1]
        outputs, states = [], []
        for t in range(length):
            step = slice(t, t + 1)
            out, state = gated_delta_update(
                q[:, step],
                k[:, step],
                v[:, step],
                a[:, step],
                b[:, step],
                layer.A_log,
                layer.dt_bias,
                state,
                None,
                use_kernel=not layer.training,
            )
            outputs.append(out)
            states.append((mx.contiguous(conv_input[:, t + 1 : t + 1 + window, :]), state))
        cache[0], cache[1] = states[-1]
        cache.advance(length)
        self.capture.layers.append(states)
        out = layer.norm(mx.concatenate(outputs, axis=1), z)
        return layer.out_proj(out.reshape(batch, length, -1))


def wrap_gated_delta_layers(trunk: nn.Module) -> list[CapturingGatedDeltaNet]:
    """Wrap every gated-delta-net layer of ``trunk`` (mlx-lm's inner model); the wrappers."""
    wrappers = []
    for layer in getattr(trunk, "layers", []):
        inner = getattr(layer, "linear_attn", None)
        if isinstance(inner, CapturingGatedDeltaNet):
            wrappers.append(inner)
        elif type(inner).__name__ in WRAPPED_LAYERS:
            wrapper = CapturingGatedDeltaNet(inner)
            layer.linear_attn = wrapper
            wrappers.append(wrapper)
    return wrappers


def _projections(layer: nn.Module, inputs: mx.array) -> tuple[mx.array, ...]:
    """(mixed q/k/v before the conv, z, b, a) as the layer's own forward computes them."""
    batch, length, _ = inputs.shape
    if hasattr(layer, "in_proj_qkvz"):  # qwen3_next
        q, k, v, z, b, a = layer.fix_query_key_value_ordering(
            layer.in_proj_qkvz(inputs), layer.in_proj_ba(inputs)
        )
        mixed = mx.concatenate(
            [
                q.reshape(batch, length, -1),
                k.reshape(batch, length, -1),
                v.reshape(batch, length, -1),
            ],
            axis=-1,
        )
        return mixed, z, b, a
    z = layer.in_proj_z(inputs).reshape(batch, length, layer.num_v_heads, layer.head_v_dim)
    return layer.in_proj_qkv(inputs), z, layer.in_proj_b(inputs), layer.in_proj_a(inputs)
