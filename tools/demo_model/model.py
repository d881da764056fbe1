"""The demo model in PyTorch: a small Qwen3.5 text trunk plus one Qwen-style MTP layer.

The trunk is transformers' own `Qwen3_5ForCausalLM` (gated-delta-net layers mixed with full
attention), so its weights mean exactly what a real Qwen3.5 checkpoint's do. transformers has no MTP
module (it drops `mtp.*` on load), so the head is built here from transformers' building blocks
following the reference design (docs/formats.md#running-the-heads): the embedding of token t+1 and
the trunk's post-norm hidden state at t are each RMS-normed, concatenated (embedding first),
projected by `fc`, run through one full-attention decoder layer, normed and scored by the trunk's
`lm_head`. Its parameter names are those of a real release's `mtp.*` tensors.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn
from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer, Qwen3_5RMSNorm


@dataclass(frozen=True)
class ModelShape:
    """The demo model's size; every other hyper-parameter follows Qwen3.5's defaults."""

    vocab_size: int = 4096
    hidden_size: int = 256
    intermediate_size: int = 768
    num_hidden_layers: int = 8
    full_attention_interval: int = (
        4  # Qwen3.5's pattern: three gated-delta-net layers, then one full
    )
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 64
    linear_num_heads: int = 4  # key heads == value heads: no head regrouping anywhere
    linear_head_dim: int = 64  # llama.cpp's qwen35 requires key head dim == value head dim
    max_position_embeddings: int = 4096


def text_config(shape: ModelShape, eos_token_id: int, pad_token_id: int) -> Qwen3_5TextConfig:
    """A Qwen3.5 text config for ``shape``, with one MTP layer declared as real releases do."""
    layer_types = [
        "full_attention" if (i + 1) % shape.full_attention_interval == 0 else "linear_attention"
        for i in range(shape.num_hidden_layers)
    ]
    config = Qwen3_5TextConfig(
        vocab_size=shape.vocab_size,
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_hidden_layers,
        num_attention_heads=shape.num_attention_heads,
        num_key_value_heads=shape.num_key_value_heads,
        head_dim=shape.head_dim,
        linear_num_key_heads=shape.linear_num_heads,
        linear_num_value_heads=shape.linear_num_heads,
        linear_key_head_dim=shape.linear_head_dim,
        linear_value_head_dim=shape.linear_head_dim,
        linear_conv_kernel_dim=4,
        layer_types=layer_types,
        max_position_embeddings=shape.max_position_embeddings,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10_000_000.0,
            "partial_rotary_factor": 0.25,
            "mrope_section": [11, 11, 10],
            "mrope_interleaved": True,
        },
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
        bos_token_id=None,
    )
    config.architectures = ["Qwen3_5ForCausalLM"]
    config.full_attention_interval = shape.full_attention_interval
    config.mtp_num_hidden_layers = 1
    config.mtp_use_dedicated_embeddings = False
    config._attn_implementation = "sdpa"
    return config


class MtpHead(nn.Module):
    """One Qwen-style MTP layer; its ``state_dict`` keys are a release's ``mtp.*`` names."""

    def __init__(self, config: Qwen3_5TextConfig) -> None:
        super().__init__()
        layer_config = copy.deepcopy(config)
        layer_config.num_hidden_layers = 1
        layer_config.layer_types = ["full_attention"]
        hidden, eps = config.hidden_size, config.rms_norm_eps
        self.pre_fc_norm_embedding = Qwen3_5RMSNorm(hidden, eps=eps)
        self.pre_fc_norm_hidden = Qwen3_5RMSNorm(hidden, eps=eps)
        self.fc = nn.Linear(2 * hidden, hidden, bias=False)
        self.layers = nn.ModuleList([Qwen3_5DecoderLayer(layer_config, 0)])
        self.norm = Qwen3_5RMSNorm(hidden, eps=eps)

    def forward(
        self,
        token_embeddings: torch.Tensor,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor],
        attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Rows (embedding of x_{p}, hidden state for p-1) → the head's post-norm state for p.

        Without ``attention_mask`` the rows attend causally; a boolean mask [rows, rows] (True =
        may attend) expresses anything else, e.g. recursive drafting. ``lm_head`` of the result
        gives the head's prediction of x_{p+1}.
        """
        merged = torch.cat(
            [self.pre_fc_norm_embedding(token_embeddings), self.pre_fc_norm_hidden(hidden_states)],
            dim=-1,
        )
        states = self.fc(merged)
        mask = None if attention_mask is None else attention_mask[None, None]
        for layer in self.layers:
            states = layer(states, position_embeddings=position_embeddings, attention_mask=mask)
        return self.norm(states)


class DemoMtpModel(nn.Module):
    """The trunk (``model.*``, ``lm_head``) and the head (``mtp.*``) in one state dict."""

    def __init__(self, config: Qwen3_5TextConfig) -> None:
        super().__init__()
        self.trunk = Qwen3_5ForCausalLM(config)
        self.mtp = MtpHead(config)
        self.mtp.apply(self.trunk._init_weights)

    @property
    def config(self) -> Qwen3_5TextConfig:
        return self.trunk.config

    def embed(self, token_ids: torch.Tensor) -> torch.Tensor:
        return self.trunk.model.embed_tokens(token_ids)

    def logits(self, states: torch.Tensor) -> torch.Tensor:
        return self.trunk.lm_head(states)

    def trunk_states(self, token_ids: torch.Tensor) -> torch.Tensor:
        """The trunk's post-norm last hidden states, [batch, seq, hidden]."""
        return self.trunk.model(input_ids=token_ids, use_cache=False).last_hidden_state

    def rope(
        self, states: torch.Tensor, positions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotary embeddings for ``positions`` [seq] (text positions: all MRoPE axes equal)."""
        return self.trunk.model.rotary_emb(states, positions[None, :])

    def release_state_dict(self) -> dict[str, torch.Tensor]:
        """All weights under the names a Qwen3.5 release uses (trunk as is, head under mtp.*)."""
        tensors = dict(self.trunk.state_dict())
        tensors.update({f"mtp.{name}": value for name, value in self.mtp.state_dict().items()})
        return tensors
