"""Writes tiny random Qwen3.5 (arch ``qwen35``) GGUF files for the runtime tests.

The real demo model takes a long training run; the runtime tests need a model that loads in
milliseconds and still exercises everything the backend does: gated-delta-net (recurrent) layers
mixed with full-attention layers, one nextn (MTP) block, a byte-level BPE vocabulary with control
tokens, and a chat template.

Random weights would make the MTP head agree with the trunk about 1/vocab of the time, which
never exercises acceptance. So the trunk is built to be "mostly a bigram model": the residual
stream starts as the token embedding and the layers only add a small, context-dependent
perturbation. The MTP head's ``eh_proj`` passes the embedding half through and shares the trunk's
output head, so it predicts roughly the trunk's bigram. ``perturbation`` sets how often context
flips the trunk's choice, hence how often the head is wrong: partial acceptances on demand.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
from gguf.vocab import bytes_to_unicode

CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
MERGES = ("Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "o n", "Ġ s", "r e", "a t")


@dataclass(frozen=True)
class TinyModelShape:
    n_embd: int = 64
    n_ff: int = 128
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 16
    n_trunk_layers: int = 4
    full_attention_interval: int = 2
    ssm_state: int = 16
    ssm_groups: int = 2
    ssm_value_heads: int = 2
    ssm_conv_kernel: int = 4
    context_length: int = 4096


def _byte_symbols() -> list[str]:
    """GPT-2's reversible byte → printable-character table (the ``gpt2`` BPE model's alphabet)."""
    table = bytes_to_unicode()
    return [table[byte] for byte in range(256)]


def vocabulary() -> tuple[list[str], list[int]]:
    """Token strings and token types: 256 byte tokens, the merges' results, then control tokens."""
    tokens = _byte_symbols() + [merge.replace(" ", "") for merge in MERGES]
    types = [int(gguf.TokenType.NORMAL)] * len(tokens)
    tokens += list(SPECIAL_TOKENS)
    types += [int(gguf.TokenType.CONTROL)] * len(SPECIAL_TOKENS)
    return tokens, types


def write_tiny_qwen35(
    path: Path,
    *,
    mtp_blocks: int = 1,
    seed: int = 0,
    perturbation: float = 0.35,
    output_scale: float = 1.0,
    shape: TinyModelShape = TinyModelShape(),
    scrambled_head: bool = False,
) -> Path:
    """Write a random qwen35 GGUF to ``path`` with ``mtp_blocks`` nextn blocks (0 = none).

    ``scrambled_head`` permutes the embedding half of the head's ``eh_proj``: the head then
    predicts from the wrong features, as a backend that miscomputes it would, and its drafts
    are almost never right (the trunk, hence the output, is unchanged)."""
    rng = np.random.default_rng(seed)
    tokens, token_types = vocabulary()
    n_vocab = len(tokens)
    s = shape
    n_blocks = s.n_trunk_layers + mtp_blocks
    key_dim = s.ssm_state * s.ssm_groups
    value_dim = s.ssm_state * s.ssm_value_heads
    rope_dims = s.head_dim // 2

    def normal(rows: int, cols: int, scale: float) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * scale).astype(np.float32)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    unit = 1.0 / np.sqrt(s.n_embd)
    small = perturbation / np.sqrt(s.n_embd)
    small_ff = perturbation / np.sqrt(s.n_ff)

    writer = gguf.GGUFWriter(str(path), "qwen35")
    writer.add_name("tiny-random-qwen35")
    writer.add_block_count(n_blocks)
    writer.add_context_length(s.context_length)
    writer.add_embedding_length(s.n_embd)
    writer.add_feed_forward_length(s.n_ff)
    writer.add_head_count(s.n_head)
    writer.add_head_count_kv(s.n_head_kv)
    writer.add_key_length(s.head_dim)
    writer.add_value_length(s.head_dim)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(10_000_000.0)
    writer.add_rope_dimension_count(rope_dims)
    writer.add_rope_dimension_sections([rope_dims // 4, rope_dims // 4, 0, 0])
    writer.add_full_attention_interval(s.full_attention_interval)
    writer.add_ssm_conv_kernel(s.ssm_conv_kernel)
    writer.add_ssm_inner_size(value_dim)
    writer.add_ssm_state_size(s.ssm_state)
    writer.add_ssm_time_step_rank(s.ssm_value_heads)
    writer.add_ssm_group_count(s.ssm_groups)
    if mtp_blocks:
        writer.add_nextn_predict_layers(mtp_blocks)

    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(token_types)
    writer.add_token_merges(list(MERGES))
    writer.add_eos_token_id(tokens.index("<|im_end|>"))
    writer.add_pad_token_id(tokens.index("<|endoftext|>"))
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHATML_TEMPLATE)

    writer.add_tensor("token_embd.weight", normal(n_vocab, s.n_embd, 1.0))
    writer.add_tensor("output_norm.weight", ones(s.n_embd))
    writer.add_tensor("output.weight", normal(n_vocab, s.n_embd, output_scale))

    def add_attention(bid: int) -> None:
        q_width = s.head_dim * s.n_head
        writer.add_tensor(f"blk.{bid}.attn_q.weight", normal(2 * q_width, s.n_embd, small))
        writer.add_tensor(
            f"blk.{bid}.attn_k.weight", normal(s.head_dim * s.n_head_kv, s.n_embd, 0.3)
        )
        writer.add_tensor(
            f"blk.{bid}.attn_v.weight", normal(s.head_dim * s.n_head_kv, s.n_embd, 0.3)
        )
        writer.add_tensor(f"blk.{bid}.attn_output.weight", normal(s.n_embd, q_width, small))
        writer.add_tensor(f"blk.{bid}.attn_q_norm.weight", ones(s.head_dim))
        writer.add_tensor(f"blk.{bid}.attn_k_norm.weight", ones(s.head_dim))

    def add_recurrent(bid: int) -> None:
        conv_dim = 2 * key_dim + value_dim
        writer.add_tensor(f"blk.{bid}.attn_qkv.weight", normal(conv_dim, s.n_embd, 0.3))
        writer.add_tensor(f"blk.{bid}.attn_gate.weight", normal(value_dim, s.n_embd, 0.3))
        writer.add_tensor(f"blk.{bid}.ssm_conv1d.weight", normal(conv_dim, s.ssm_conv_kernel, 0.5))
        writer.add_tensor(f"blk.{bid}.ssm_dt.bias", np.zeros(s.ssm_value_heads, np.float32))
        a = -np.linspace(0.5, 1.5, s.ssm_value_heads).astype(np.float32)
        writer.add_tensor(f"blk.{bid}.ssm_a", a)
        writer.add_tensor(f"blk.{bid}.ssm_beta.weight", normal(s.ssm_value_heads, s.n_embd, 0.3))
        writer.add_tensor(f"blk.{bid}.ssm_alpha.weight", normal(s.ssm_value_heads, s.n_embd, 0.3))
        writer.add_tensor(f"blk.{bid}.ssm_norm.weight", ones(s.ssm_state))
        writer.add_tensor(f"blk.{bid}.ssm_out.weight", normal(s.n_embd, value_dim, small))

    def add_common(bid: int) -> None:
        writer.add_tensor(f"blk.{bid}.attn_norm.weight", ones(s.n_embd))
        writer.add_tensor(f"blk.{bid}.post_attention_norm.weight", ones(s.n_embd))
        writer.add_tensor(f"blk.{bid}.ffn_gate.weight", normal(s.n_ff, s.n_embd, unit))
        writer.add_tensor(f"blk.{bid}.ffn_up.weight", normal(s.n_ff, s.n_embd, unit))
        writer.add_tensor(f"blk.{bid}.ffn_down.weight", normal(s.n_embd, s.n_ff, small_ff))

    for bid in range(s.n_trunk_layers):
        if (bid + 1) % s.full_attention_interval == 0:
            add_attention(bid)
        else:
            add_recurrent(bid)
        add_common(bid)

    for bid in range(s.n_trunk_layers, n_blocks):
        add_attention(bid)
        add_common(bid)
        embedding_half = np.eye(s.n_embd, dtype=np.float32)
        if scrambled_head:
            embedding_half = embedding_half[np.random.default_rng(seed + 1).permutation(s.n_embd)]
        hidden_half = normal(s.n_embd, s.n_embd, small)
        writer.add_tensor(
            f"blk.{bid}.nextn.eh_proj.weight", np.concatenate([embedding_half, hidden_half], 1)
        )
        writer.add_tensor(f"blk.{bid}.nextn.enorm.weight", ones(s.n_embd))
        writer.add_tensor(f"blk.{bid}.nextn.hnorm.weight", ones(s.n_embd))
        writer.add_tensor(f"blk.{bid}.nextn.shared_head_norm.weight", ones(s.n_embd))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
