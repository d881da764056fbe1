"""Tiny synthetic bases and sidecars for the MoE and MLA paths of the graft (qwen35moe, deepseek2).

The converter cross-check (converter_crosscheck.py) needs torch; these need only numpy and gguf-py,
so the suite itself exercises expert stacking, the fused ``gate_up_proj`` split and DeepSeek MLA's
``kv_b_proj`` split on every run. The base's values do not matter (only its shapes are checked),
so its tensors are F32 zeros; the sidecar's are random BF16 values so the split can be verified.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGUFWriter

HIDDEN, VOCAB, EXPERTS, EXPERT_FF = 64, 256, 4, 32
HEADS, NOPE, ROPE, VALUE, KV_LORA, Q_LORA = 2, 32, 32, 32, 32, 32


def write_base(path: Path, arch: str, keys: dict, blocks: int, block: dict) -> Path:
    """A GGUF with ``blocks`` copies of ``block`` (suffix → GGML dims) and F32 zero data."""
    writer = GGUFWriter(path, arch)
    writer.add_block_count(blocks)
    writer.add_embedding_length(HIDDEN)
    for key, value in keys.items():
        writer.add_key_value(f"{arch}.{key}", *value)
    writer.add_tensor("token_embd.weight", np.zeros((VOCAB, HIDDEN), np.float32))
    for index in range(blocks):
        for suffix, dims in block.items():
            writer.add_tensor(f"blk.{index}.{suffix}", np.zeros(tuple(reversed(dims)), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


QWEN_MOE_BLOCK = {
    "attn_norm.weight": (HIDDEN,),
    "post_attention_norm.weight": (HIDDEN,),
    "attn_q.weight": (HIDDEN, 2 * HEADS * 32),
    "attn_k.weight": (HIDDEN, 32),
    "attn_v.weight": (HIDDEN, 32),
    "attn_output.weight": (HEADS * 32, HIDDEN),
    "attn_q_norm.weight": (32,),
    "attn_k_norm.weight": (32,),
    "ffn_gate_inp.weight": (HIDDEN, EXPERTS),
    "ffn_gate_exps.weight": (HIDDEN, EXPERT_FF, EXPERTS),
    "ffn_up_exps.weight": (HIDDEN, EXPERT_FF, EXPERTS),
    "ffn_down_exps.weight": (EXPERT_FF, HIDDEN, EXPERTS),
    "ffn_gate_inp_shexp.weight": (HIDDEN, 1),
    "ffn_gate_shexp.weight": (HIDDEN, EXPERT_FF),
    "ffn_up_shexp.weight": (HIDDEN, EXPERT_FF),
    "ffn_down_shexp.weight": (EXPERT_FF, HIDDEN),
}

DEEPSEEK_BLOCK = {
    "attn_norm.weight": (HIDDEN,),
    "attn_q_a_norm.weight": (Q_LORA,),
    "attn_kv_a_norm.weight": (KV_LORA,),
    "attn_q_a.weight": (HIDDEN, Q_LORA),
    "attn_q_b.weight": (Q_LORA, HEADS * (NOPE + ROPE)),
    "attn_kv_a_mqa.weight": (HIDDEN, KV_LORA + ROPE),
    "attn_k_b.weight": (NOPE, KV_LORA, HEADS),
    "attn_v_b.weight": (KV_LORA, VALUE, HEADS),
    "attn_output.weight": (HEADS * VALUE, HIDDEN),
    "ffn_norm.weight": (HIDDEN,),
    "ffn_gate_inp.weight": (HIDDEN, EXPERTS),
    "exp_probs_b.bias": (EXPERTS,),
    "ffn_gate_exps.weight": (HIDDEN, EXPERT_FF, EXPERTS),
    "ffn_up_exps.weight": (HIDDEN, EXPERT_FF, EXPERTS),
    "ffn_down_exps.weight": (EXPERT_FF, HIDDEN, EXPERTS),
    "ffn_gate_shexp.weight": (HIDDEN, EXPERT_FF),
    "ffn_up_shexp.weight": (HIDDEN, EXPERT_FF),
    "ffn_down_shexp.weight": (EXPERT_FF, HIDDEN),
}


def qwen35moe_base(path: Path) -> Path:
    keys = {"attention.recurrent_layers": ([False, False], 9, 7)}  # ARRAY of BOOL
    return write_base(path, "qwen35moe", keys, 2, QWEN_MOE_BLOCK)


def deepseek2_base(path: Path) -> Path:
    return write_base(path, "deepseek2", {}, 1, DEEPSEEK_BLOCK)


def qwen35moe_sidecar_tensors(rng: np.random.Generator, fused: bool) -> dict[str, np.ndarray]:
    def r(*shape: int) -> np.ndarray:
        return rng.normal(0.0, 0.02, size=shape).astype(np.float32)

    layer = "mtp.layers.0."
    tensors = {
        "mtp.fc.weight": r(HIDDEN, 2 * HIDDEN),
        "mtp.pre_fc_norm_embedding.weight": r(HIDDEN),
        "mtp.pre_fc_norm_hidden.weight": r(HIDDEN),
        "mtp.norm.weight": r(HIDDEN),
        layer + "input_layernorm.weight": r(HIDDEN),
        layer + "post_attention_layernorm.weight": r(HIDDEN),
        layer + "self_attn.q_proj.weight": r(2 * HEADS * 32, HIDDEN),
        layer + "self_attn.k_proj.weight": r(32, HIDDEN),
        layer + "self_attn.v_proj.weight": r(32, HIDDEN),
        layer + "self_attn.o_proj.weight": r(HIDDEN, HEADS * 32),
        layer + "self_attn.q_norm.weight": r(32),
        layer + "self_attn.k_norm.weight": r(32),
        layer + "mlp.gate.weight": r(EXPERTS, HIDDEN),
        layer + "mlp.shared_expert_gate.weight": r(1, HIDDEN),
        layer + "mlp.shared_expert.gate_proj.weight": r(EXPERT_FF, HIDDEN),
        layer + "mlp.shared_expert.up_proj.weight": r(EXPERT_FF, HIDDEN),
        layer + "mlp.shared_expert.down_proj.weight": r(HIDDEN, EXPERT_FF),
    }
    gate, up, down = (
        r(EXPERTS, EXPERT_FF, HIDDEN),
        r(EXPERTS, EXPERT_FF, HIDDEN),
        r(EXPERTS, HIDDEN, EXPERT_FF),
    )
    if fused:
        tensors[layer + "mlp.experts.gate_up_proj"] = np.concatenate([gate, up], axis=1)
        tensors[layer + "mlp.experts.down_proj"] = down
    else:
        for e in range(EXPERTS):
            tensors[layer + f"mlp.experts.{e}.gate_proj.weight"] = gate[e]
            tensors[layer + f"mlp.experts.{e}.up_proj.weight"] = up[e]
            tensors[layer + f"mlp.experts.{e}.down_proj.weight"] = down[e]
    return tensors


def deepseek2_sidecar_tensors(
    rng: np.random.Generator, layer_index: int = 1
) -> dict[str, np.ndarray]:
    def r(*shape: int) -> np.ndarray:
        return rng.normal(0.0, 0.02, size=shape).astype(np.float32)

    p = f"model.layers.{layer_index}."
    tensors = {
        p + "eh_proj.weight": r(HIDDEN, 2 * HIDDEN),
        p + "enorm.weight": 1 + r(HIDDEN),
        p + "hnorm.weight": 1 + r(HIDDEN),
        p + "shared_head.norm.weight": 1 + r(HIDDEN),
        p + "shared_head.head.weight": r(VOCAB, HIDDEN),
        p + "embed_tokens.weight": r(VOCAB, HIDDEN),
        p + "input_layernorm.weight": 1 + r(HIDDEN),
        p + "post_attention_layernorm.weight": 1 + r(HIDDEN),
        p + "self_attn.q_a_proj.weight": r(Q_LORA, HIDDEN),
        p + "self_attn.q_a_layernorm.weight": 1 + r(Q_LORA),
        p + "self_attn.q_b_proj.weight": r(HEADS * (NOPE + ROPE), Q_LORA),
        p + "self_attn.kv_a_proj_with_mqa.weight": r(KV_LORA + ROPE, HIDDEN),
        p + "self_attn.kv_a_layernorm.weight": 1 + r(KV_LORA),
        p + "self_attn.kv_b_proj.weight": r(HEADS * (NOPE + VALUE), KV_LORA),
        p + "self_attn.o_proj.weight": r(HIDDEN, HEADS * VALUE),
        p + "mlp.gate.weight": r(EXPERTS, HIDDEN),
        p + "mlp.gate.e_score_correction_bias": r(EXPERTS),
        p + "mlp.shared_experts.gate_proj.weight": r(EXPERT_FF, HIDDEN),
        p + "mlp.shared_experts.up_proj.weight": r(EXPERT_FF, HIDDEN),
        p + "mlp.shared_experts.down_proj.weight": r(HIDDEN, EXPERT_FF),
    }
    for e in range(EXPERTS):
        tensors[p + f"mlp.experts.{e}.gate_proj.weight"] = r(EXPERT_FF, HIDDEN)
        tensors[p + f"mlp.experts.{e}.up_proj.weight"] = r(EXPERT_FF, HIDDEN)
        tensors[p + f"mlp.experts.{e}.down_proj.weight"] = r(HIDDEN, EXPERT_FF)
    return tensors
