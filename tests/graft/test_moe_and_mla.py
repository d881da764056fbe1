"""The MoE and MLA paths of the mapping on tiny synthetic models: experts stacked into one
3-D tensor per projection (per-expert and fused ``gate_up_proj`` sidecars give the same tensors),
routers kept F32, DeepSeek MLA's ``kv_b_proj`` split into per-head-transposed ``k_b`` and
``v_b``, the NextN names, and a NextN layer that does not follow the base's trunk refused.

llama.cpp's converter itself is the reference in converter_crosscheck.py (it needs torch); here
the expected values are computed from the sidecar with numpy, as the converter's code describes.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader, quants

from app.engine.errors import GraftError
from app.engine.graft import graft_mtp
from tests.graft.sidecars import bf16, write_bf16_tensors
from tests.graft.synthetic import (
    EXPERTS,
    HEADS,
    KV_LORA,
    NOPE,
    VALUE,
    deepseek2_base,
    deepseek2_sidecar_tensors,
    qwen35moe_base,
    qwen35moe_sidecar_tensors,
)


def _values(path: Path) -> dict[str, tuple[GGMLQuantizationType, np.ndarray]]:
    result = {}
    for tensor in GGUFReader(path).tensors:
        data = quants.dequantize(np.asarray(tensor.data), tensor.tensor_type)
        shape = tuple(int(d) for d in reversed(tensor.shape))
        result[tensor.name] = (tensor.tensor_type, data.reshape(shape))
    return result


def test_qwen35moe_experts_are_stacked_and_a_fused_sidecar_gives_the_same_tensors(
    tmp_path: Path,
) -> None:
    base = qwen35moe_base(tmp_path / "base.gguf")
    per_expert = qwen35moe_sidecar_tensors(np.random.default_rng(1), fused=False)
    fused = qwen35moe_sidecar_tensors(np.random.default_rng(1), fused=True)
    outputs = {}
    for label, tensors in (("per-expert", per_expert), ("fused", fused)):
        sidecar = write_bf16_tensors(tmp_path / f"{label}.safetensors", tensors, "qwen-mtp")
        outputs[label] = tmp_path / f"{label}.gguf"
        result = graft_mtp(base, sidecar, outputs[label], head_type="bf16")
        assert (result.trunk_blocks, result.head_blocks, result.head_tensors) == (2, 1, 20)
    grafted, from_fused = _values(outputs["per-expert"]), _values(outputs["fused"])
    assert sorted(grafted) == sorted(from_fused)
    for name, (kind, values) in grafted.items():
        assert from_fused[name][0] == kind and np.array_equal(from_fused[name][1], values), name
    layer = "mtp.layers.0.mlp."
    for projection in ("gate", "up", "down"):
        kind, stacked = grafted[f"blk.2.ffn_{projection}_exps.weight"]
        assert kind == GGMLQuantizationType.BF16
        expected = np.stack(
            [per_expert[f"{layer}experts.{e}.{projection}_proj.weight"] for e in range(EXPERTS)]
        )
        assert np.array_equal(stacked, bf16(expected)), projection
    for router, source in (("ffn_gate_inp", "gate"), ("ffn_gate_inp_shexp", "shared_expert_gate")):
        kind, values = grafted[f"blk.2.{router}.weight"]
        assert kind == GGMLQuantizationType.F32  # the converter keeps MoE routers in F32
        assert np.array_equal(values, bf16(per_expert[f"{layer}{source}.weight"]))
    kind, norm = grafted["blk.2.post_attention_norm.weight"]
    assert np.array_equal(
        norm, bf16(per_expert["mtp.layers.0.post_attention_layernorm.weight"]) + 1
    )
    assert GGUFReader(outputs["fused"]).fields[
        "qwen35moe.attention.recurrent_layers"
    ].contents() == [
        False,
        False,
        False,
    ]


def test_deepseek2_mla_kv_b_is_split_into_transposed_k_b_and_v_b(tmp_path: Path) -> None:
    tensors = deepseek2_sidecar_tensors(np.random.default_rng(2))
    sidecar = write_bf16_tensors(tmp_path / "mtp.safetensors", tensors, "deepseek-nextn")
    out = tmp_path / "grafted.gguf"
    result = graft_mtp(deepseek2_base(tmp_path / "base.gguf"), sidecar, out, head_type="bf16")
    assert (result.trunk_blocks, result.head_blocks, result.norm_style) == (1, 1, "absolute")
    grafted = _values(out)
    kv_b = bf16(tensors["model.layers.1.self_attn.kv_b_proj.weight"]).reshape(
        HEADS, NOPE + VALUE, KV_LORA
    )
    k_b, v_b = grafted["blk.1.attn_k_b.weight"][1], grafted["blk.1.attn_v_b.weight"][1]
    assert k_b.shape == (HEADS, KV_LORA, NOPE) and v_b.shape == (HEADS, VALUE, KV_LORA)
    assert np.array_equal(k_b, kv_b[:, :NOPE, :].transpose(0, 2, 1))
    assert np.array_equal(v_b, kv_b[:, NOPE:, :])
    assert "blk.1.attn_kv_b.weight" not in grafted
    kind, bias = grafted["blk.1.exp_probs_b.bias"]
    assert kind == GGMLQuantizationType.F32
    assert np.array_equal(bias, bf16(tensors["model.layers.1.mlp.gate.e_score_correction_bias"]))
    kind, enorm = grafted["blk.1.nextn.enorm.weight"]
    assert np.array_equal(enorm, bf16(tensors["model.layers.1.enorm.weight"]))  # absolute: no +1
    nextn = {name for name in grafted if ".nextn." in name}
    names = gguf.TENSOR_NAMES
    expected = {
        names[t].format(bid=1) + ".weight"
        for t in (
            gguf.MODEL_TENSOR.NEXTN_EH_PROJ,
            gguf.MODEL_TENSOR.NEXTN_ENORM,
            gguf.MODEL_TENSOR.NEXTN_HNORM,
            gguf.MODEL_TENSOR.NEXTN_SHARED_HEAD_NORM,
            gguf.MODEL_TENSOR.NEXTN_SHARED_HEAD_HEAD,
            gguf.MODEL_TENSOR.NEXTN_EMBED_TOKENS,
        )
    }
    assert nextn == expected
    fields = GGUFReader(out).fields
    assert fields["deepseek2.block_count"].contents() == 2
    assert fields["deepseek2.nextn_predict_layers"].contents() == 1


def test_a_nextn_layer_that_does_not_follow_the_trunk_is_refused(tmp_path: Path) -> None:
    tensors = deepseek2_sidecar_tensors(np.random.default_rng(3), layer_index=61)
    sidecar = write_bf16_tensors(tmp_path / "v3.safetensors", tensors, "deepseek-nextn")
    with pytest.raises(GraftError) as refused:
        graft_mtp(deepseek2_base(tmp_path / "base.gguf"), sidecar, tmp_path / "out.gguf")
    assert str(refused.value) == (
        "sidecar v3.safetensors: its NextN layer model.layers.61 follows a 61-layer trunk, but "
        "the base GGUF's trunk has 1 blocks; the sidecar belongs to another model"
    )
    assert not (tmp_path / "out.gguf").exists()
