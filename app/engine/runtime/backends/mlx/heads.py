"""MTP heads for the MLX backend, built from mlx-lm's own decoder-layer classes.

mlx-lm has no MTP: its converters drop the head and its models never run one. The head is one
decoder block of the trunk's own kind (same class, same arguments) wrapped in the fusion layers
of its family (docs/formats.md#running-the-heads):

- **Qwen** (qwen3_5, qwen3_5_moe, qwen3_next): e = pre_fc_norm_embedding(embed(x_{t+1})),
  h = pre_fc_norm_hidden(h_t), z = fc([e, h]), z = layer(z), out = norm(z); logits = lm_head(out).
  Depth k > 1 feeds ``out`` (post-norm) as the next h, as vLLM and MTPLX do.
- **NextN** (deepseek_v3, glm4_moe): enorm, hnorm, eh_proj over [enorm(e), hnorm(h)], the block,
  shared_head.norm and shared_head.head (or the trunk's head); depth k > 1 feeds the block's
  output before ``shared_head.norm``.

Both take the trunk's embedding and lm_head modules (quantised ones included) unless the head
carries its own copies. Parameter names follow the checkpoint's, so a sidecar loads by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.base import create_attention_mask

QWEN_STYLE = "qwen"
NEXTN_STYLE = "nextn"
HEAD_STYLE_BY_MODEL_TYPE = {
    "qwen3_5": QWEN_STYLE,
    "qwen3_5_moe": QWEN_STYLE,
    "qwen3_next": QWEN_STYLE,
    "deepseek_v3": NEXTN_STYLE,
    "glm4_moe": NEXTN_STYLE,
}

Projection = Callable[[mx.array], mx.array]


class QwenMtpHead(nn.Module):
    """Qwen-style MTP head: names as in ``mtp.*`` without the prefix."""

    def __init__(self, hidden_size: int, eps: float, layer: nn.Module) -> None:
        super().__init__()
        self.pre_fc_norm_embedding = nn.RMSNorm(hidden_size, eps=eps)
        self.pre_fc_norm_hidden = nn.RMSNorm(hidden_size, eps=eps)
        self.fc = nn.Linear(2 * hidden_size, hidden_size, bias=False)
        self.layers = [layer]
        self.norm = nn.RMSNorm(hidden_size, eps=eps)

    def __call__(
        self, embeddings: mx.array, hidden: mx.array, cache: Any
    ) -> tuple[mx.array, mx.array]:
        """(hidden to feed the next depth, hidden for the lm_head)."""
        fused = self.fc(
            mx.concatenate(
                [self.pre_fc_norm_embedding(embeddings), self.pre_fc_norm_hidden(hidden)], axis=-1
            )
        )
        out = self.norm(
            self.layers[0](fused, mask=create_attention_mask(fused, cache), cache=cache)
        )
        return out, out


class SharedHead(nn.Module):
    """NextN's ``shared_head``: its norm, and its own output projection when the head has one."""

    def __init__(self, hidden_size: int, vocab_size: int, eps: float, own_head: bool) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(hidden_size, eps=eps)
        if own_head:
            self.head = nn.Linear(hidden_size, vocab_size, bias=False)


class NextnMtpHead(nn.Module):
    """DeepSeek/GLM NextN head: ``enorm``, ``hnorm``, ``eh_proj``, the block, ``shared_head``."""

    def __init__(
        self,
        hidden_size: int,
        vocab_size: int,
        eps: float,
        layer: nn.Module,
        *,
        own_head: bool,
        own_embedding: bool,
    ) -> None:
        super().__init__()
        self.enorm = nn.RMSNorm(hidden_size, eps=eps)
        self.hnorm = nn.RMSNorm(hidden_size, eps=eps)
        self.eh_proj = nn.Linear(2 * hidden_size, hidden_size, bias=False)
        self.layer = layer
        self.shared_head = SharedHead(hidden_size, vocab_size, eps, own_head)
        if own_embedding:
            self.embed_tokens = nn.Embedding(vocab_size, hidden_size)

    def __call__(
        self, embeddings: mx.array, hidden: mx.array, cache: Any
    ) -> tuple[mx.array, mx.array]:
        fused = self.eh_proj(mx.concatenate([self.enorm(embeddings), self.hnorm(hidden)], axis=-1))
        # an explicit mask array: DeepSeek's MLA adds it to its rope scores
        mask = create_attention_mask(fused, cache, return_array=True)
        out = self.layer(fused, mask=mask, cache=cache)
        return out, self.shared_head.norm(out)


class MtpHead:
    """A head bound to its embedding and output projection: ``step`` → (next hidden, logits)."""

    def __init__(
        self, module: QwenMtpHead | NextnMtpHead, embed: Projection, project: Projection
    ) -> None:
        self.module = module
        self._embed = embed
        self._project = project

    def step(self, tokens: mx.array, hidden: mx.array, cache: Any) -> tuple[mx.array, mx.array]:
        """Rows (token x_{p+1}, trunk hidden h_p) through the head; logits of every row."""
        carried, normed = self.module(self._embed(tokens), hidden, cache)
        return carried, self._project(normed)
