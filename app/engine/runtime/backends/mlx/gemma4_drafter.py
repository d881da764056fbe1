"""Gemma 4's separate MTP drafter (``gemma4_assistant``) for the MLX backend, on mlx-lm's layers.

mlx-lm 0.32 runs Gemma 4 (``gemma4`` / ``gemma4_text``) but has no assistant. The assistant is
mlx-lm's own Gemma 4 decoder layers with every layer KV-shared (no key/value projections), wrapped
as transformers' ``Gemma4AssistantForCausalLM`` wraps them (docs/drafters.md):

- input: [E(x)·√H, h] — the *target's* scaled embedding of the newest token x and the target's
  post-norm hidden state h of the position before it (the first step) or this drafter's own
  carried state (later steps) — through ``pre_projection`` to the drafter's width;
- its layers' queries, at the newest token's position (the same position for every step),
  attend to the target's keys and values of the positions before it: the target's last
  KV-producing sliding layer for the sliding layers (only keys within the window), its last full
  layer for the full ones — read from the target's mlx-lm cache, never copied into a cache of
  the drafter's own;
- output: ``post_projection`` of the final-norm state (carried to the next step) and logits from
  the tied embedding — over the whole vocabulary, or, with ``use_ordered_embeddings`` (E2B/E4B),
  only for the tokens of the ``centroid_intermediate_top_k`` best-scoring centroids, every other
  token set to (the lowest of those logits − 1), as transformers does.

Weights load by their checkpoint names. The step matches transformers 5.23 within float32
rounding (tests/runtime/mlx/test_gemma_drafter.py states the tolerance).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.cache import KVCache, RotatingKVCache
from mlx_lm.models.gemma4_text import DecoderLayer, ModelArgs

from app.engine.bounded_json import parse_bounded_json
from app.engine.errors import RuntimeBackendError

FULL, SLIDING = "full_attention", "sliding_attention"


@dataclass(frozen=True)
class TargetKv:
    """Keys and values of one of the target's layers ([B, kv heads, S, D]) and the position
    of every slot (S): what a drafter query may attend to."""

    keys: mx.array
    values: mx.array
    positions: mx.array


def cache_kv(cache: Any) -> TargetKv:
    """A target layer's mlx-lm cache as :class:`TargetKv` (a sliding window's rotating buffer
    put back in temporal order first, as mlx-lm itself does before appending)."""
    if isinstance(cache, RotatingKVCache):
        keys = cache._temporal_order(cache.keys)  # mlx-lm is pinned <0.33: this stays as it is
        values = cache._temporal_order(cache.values)
    elif isinstance(cache, KVCache):
        keys, values = cache.keys, cache.values
    else:
        raise RuntimeBackendError(
            f"the target's cache {type(cache).__name__} cannot be read by the Gemma 4 drafter"
        )
    if isinstance(cache, KVCache):
        count = cache.offset
        keys, values = keys[..., :count, :], values[..., :count, :]
    else:
        count = min(keys.shape[2], cache.offset)  # the newest ``count`` positions, in order
        keys, values = (
            keys[..., keys.shape[2] - count :, :],
            values[..., keys.shape[2] - count :, :],
        )
    positions = mx.arange(cache.offset - count, cache.offset)
    return TargetKv(keys, values, positions)


def target_kv(target: nn.Module, caches: list[Any]) -> dict[str, TargetKv]:
    """The keys and values the drafter reads: the target's last KV-producing layer of each
    attention type (mlx-lm keeps caches only for those layers, in order)."""
    args = target.args
    producing = args.num_hidden_layers - args.num_kv_shared_layers
    found: dict[str, TargetKv] = {}
    for kind in (FULL, SLIDING):
        layers = [i for i in range(producing) if args.layer_types[i] == kind]
        if not layers:
            raise RuntimeBackendError(f"the target has no {kind} layer for the drafter to read")
        found[kind] = cache_kv(caches[layers[-1]])
    return found


class MaskedEmbedder(nn.Module):
    """The centroid head of E2B/E4B assistants (transformers' Gemma4AssistantMaskedEmbedder)."""

    def __init__(self, hidden: int, vocab: int, centroids: int, top_k: int) -> None:
        super().__init__()
        self.centroids = nn.Linear(hidden, centroids, bias=False)
        self.token_ordering = mx.zeros((vocab,), dtype=mx.int64)
        self.top_k = top_k
        self.per_centroid = vocab // centroids

    def __call__(self, hidden: mx.array, head: mx.array) -> mx.array:
        scores = self.centroids(hidden)
        top = mx.argpartition(-scores, kth=self.top_k - 1, axis=-1)[..., : self.top_k]
        clusters = self.token_ordering.reshape(-1, self.per_centroid)
        chosen = clusters[top].reshape(*hidden.shape[:-1], -1)  # [B, L, k·per]
        selected = (head[chosen] @ hidden[..., None]).squeeze(-1)
        vocab = self.token_ordering.shape[0]
        filled = mx.full((*hidden.shape[:-1], vocab), selected.min() - 1.0, dtype=selected.dtype)
        return mx.put_along_axis(filled, chosen, selected, axis=-1)


class DrafterModel(nn.Module):
    """The assistant's decoder: mlx-lm Gemma 4 layers, all KV-shared, and the final norm."""

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(args.vocab_size, args.hidden_size)
        self.layers = [DecoderLayer(args, i) for i in range(args.num_hidden_layers)]
        self.norm = nn.RMSNorm(args.hidden_size, eps=args.rms_norm_eps)


class Gemma4Drafter(nn.Module):
    """``Gemma4AssistantForCausalLM`` in MLX: :meth:`step` drafts one token for every row."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__()
        text = dict(config["text_config"])
        text["num_kv_shared_layers"] = text["num_hidden_layers"]
        self.args = ModelArgs.from_dict(text)
        backbone = int(config["backbone_hidden_size"])
        hidden = self.args.hidden_size
        self.window = self.args.sliding_window
        self.model = DrafterModel(self.args)
        self.pre_projection = nn.Linear(2 * backbone, hidden, bias=False)
        self.post_projection = nn.Linear(hidden, backbone, bias=False)
        if config.get("use_ordered_embeddings"):
            self.masked_embedding = MaskedEmbedder(
                hidden,
                self.args.vocab_size,
                int(config["num_centroids"]),
                int(config["centroid_intermediate_top_k"]),
            )

    def step(
        self,
        embedded: mx.array,
        previous: mx.array,
        position: int,
        kv: dict[str, TargetKv],
        *,
        dense: bool = False,
    ) -> tuple[mx.array, mx.array]:
        """(logits [B, L, V], carried state [B, L, H_target]) for rows of ``embedded`` (the
        target's scaled token embeddings) and ``previous`` states, queried at ``position``.
        ``dense``: logits of the whole tied head even when the drafter has centroids."""
        h = self.pre_projection(mx.concatenate([embedded, previous], axis=-1))
        masks = {kind: self._mask(kind, kv[kind].positions, position) for kind in (FULL, SLIDING)}
        for layer in self.model.layers:
            shared = kv[layer.layer_type]
            h, _, _ = layer(
                h, masks[layer.layer_type], None, shared_kv=(shared.keys, shared.values),
                offset=position,
            )  # fmt: skip
        last = self.model.norm(h)
        head = self.model.embed_tokens.weight
        if dense or "masked_embedding" not in self:
            logits = self.model.embed_tokens.as_linear(last)
        else:
            logits = self.masked_embedding(last, head)
        return logits, self.post_projection(last)

    def _mask(self, kind: str, positions: mx.array, position: int) -> mx.array:
        visible = positions < position
        if kind == SLIDING:
            visible = visible & (position - positions < self.window)
        return visible[None, None, None, :]


def load_drafter(folder: Path) -> Gemma4Drafter:
    """The drafter in ``folder`` (config.json + safetensors), weights loaded by name."""
    config_path = folder / "config.json"
    try:
        config = parse_bounded_json(config_path.read_bytes())
    except (OSError, ValueError) as exc:
        raise RuntimeBackendError(f"{config_path} cannot be read ({exc}); re-download it") from None
    if not isinstance(config, dict) or config.get("model_type") != "gemma4_assistant":
        raise RuntimeBackendError(
            f"{folder} is not a Gemma 4 drafter (config.json model_type is not gemma4_assistant)"
        )
    drafter = Gemma4Drafter(config)
    weights: dict[str, mx.array] = {}
    for shard in sorted(folder.glob("*.safetensors")):
        weights.update(mx.load(str(shard)))
    try:
        drafter.load_weights(list(weights.items()), strict=True)
    except ValueError as exc:
        raise RuntimeBackendError(f"{folder} does not hold this drafter's weights: {exc}") from None
    mx.eval(drafter.parameters())
    return drafter


def target_embeddings(target: nn.Module, tokens: mx.array) -> mx.array:
    """E(x)·√H with the target's own embedding table (quantised or not)."""
    inner = target.model
    return inner.embed_tokens(tokens) * inner.embed_scale
