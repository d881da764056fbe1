"""A DeepSeek-V3-shaped FP8 checkpoint of any size, generated fast, for the extraction benchmark.

The benchmark needs gigabytes of realistic MTP data (E4M3 weights with F32 ``weight_scale_inv``
per 128×128 tile, a NextN layer split across shards, trunk shards around it) without downloading
anything. Tensors have DeepSeek V3's real names and full-size shapes; only the number of experts
is chosen to reach the requested size. Data comes from a pool of random valid codes reused at
random offsets, which is as good as fresh randomness for I/O and decoding speed.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.engine.mtp.writer import OutputTensor, SafetensorsStreamWriter

DEEPSEEK_V3_HIDDEN = 7168
VOCAB = 8192  # the real 129280 would make the BF16 embedding dominate; names stay real
MTP_LAYER = 61
_POOL_BYTES = 32 << 20
_CHUNK = 8 << 20


@dataclass(frozen=True)
class SyntheticCheckpointInfo:
    folder: Path
    total_bytes: int
    mtp_bytes: int
    """Stored bytes of the MTP layer: weights and scales."""
    mtp_fp8_bytes: int
    mtp_tensor_count: int
    output_bytes: int
    """BF16 data bytes of the sidecar."""


def _scaled(hidden: int, numerator: int, denominator: int) -> int:
    """A DeepSeek V3 dimension (numerator/denominator × 7168) for another model width."""
    return max(1, hidden * numerator // denominator)


def _expert_tensors(prefix: str, count: int, hidden: int) -> list[OutputTensor]:
    moe_ffn = _scaled(hidden, 2, 7)
    tensors = []
    for expert in range(count):
        for proj, shape in (
            ("gate_proj", (moe_ffn, hidden)),
            ("up_proj", (moe_ffn, hidden)),
            ("down_proj", (hidden, moe_ffn)),
        ):
            tensors += _fp8(f"{prefix}.mlp.experts.{expert}.{proj}.weight", shape)
    return tensors


def _fp8(name: str, shape: tuple[int, int]) -> list[OutputTensor]:
    grid = (math.ceil(shape[0] / 128), math.ceil(shape[1] / 128))
    return [OutputTensor(name, "F8_E4M3", shape), OutputTensor(f"{name}_scale_inv", "F32", grid)]


def _mtp_fixed_tensors(prefix: str, hidden: int) -> list[OutputTensor]:
    """Layer 61 minus its experts; at hidden=7168 these are DeepSeek V3's exact shapes."""
    q_lora = _scaled(hidden, 3, 14)
    bf16 = [
        (f"{prefix}.embed_tokens.weight", (VOCAB, hidden)),
        (f"{prefix}.shared_head.head.weight", (VOCAB, hidden)),
        (f"{prefix}.mlp.gate.weight", (256, hidden)),
    ] + [
        (f"{prefix}.{norm}.weight", (hidden,))
        for norm in ("enorm", "hnorm", "input_layernorm", "post_attention_layernorm")
    ]
    fp8 = [
        (f"{prefix}.eh_proj.weight", (hidden, 2 * hidden)),
        (f"{prefix}.self_attn.q_a_proj.weight", (q_lora, hidden)),
        (f"{prefix}.self_attn.q_b_proj.weight", (_scaled(hidden, 24, 7), q_lora)),
        (f"{prefix}.self_attn.kv_a_proj_with_mqa.weight", (_scaled(hidden, 9, 112), hidden)),
        (f"{prefix}.self_attn.kv_b_proj.weight", (_scaled(hidden, 32, 7), _scaled(hidden, 1, 14))),
        (f"{prefix}.self_attn.o_proj.weight", (hidden, _scaled(hidden, 16, 7))),
    ]
    tensors = [OutputTensor(name, "BF16", shape) for name, shape in bf16]
    for name, shape in fp8:
        tensors += _fp8(name, shape)
    return tensors


def generate_fp8_checkpoint(
    folder: Path,
    mtp_fp8_bytes: int,
    trunk_bytes: int,
    hidden: int = DEEPSEEK_V3_HIDDEN,
    seed: int = 0,
) -> SyntheticCheckpointInfo:
    """Write config, index and 3 shards: trunk, trunk + first half of layer 61, second half.

    The number of experts is chosen so the MTP layer holds about ``mtp_fp8_bytes`` of FP8 (at
    least one expert); ``hidden`` below 7168 scales every shape down, for quick tests.
    """
    folder.mkdir(parents=True, exist_ok=True)
    layer = f"model.layers.{MTP_LAYER}"
    expert_bytes = sum(t.nbytes for t in _expert_tensors(layer, 1, hidden) if t.dtype != "F32")
    mtp = _mtp_fixed_tensors(layer, hidden)
    fixed_fp8 = sum(t.nbytes for t in mtp if t.dtype == "F8_E4M3")
    experts = max(1, math.ceil((mtp_fp8_bytes - fixed_fp8) / expert_bytes))
    mtp = sorted(mtp + _expert_tensors(layer, experts, hidden), key=_by_name)
    trunk_experts = max(1, round(trunk_bytes / expert_bytes))
    trunk = sorted(_expert_tensors("model.layers.60", trunk_experts, hidden), key=_by_name)
    half = len(mtp) // 2
    shards = [
        trunk[: len(trunk) // 2],
        trunk[len(trunk) // 2 :] + mtp[:half],
        mtp[half:],
    ]
    rng = np.random.default_rng(seed)
    pools = _pools(rng)
    weight_map: dict[str, str] = {}
    for number, tensors in enumerate(shards, start=1):
        shard = f"model-{number:05d}-of-{len(shards):05d}.safetensors"
        _write_shard(folder / shard, tensors, pools, rng)
        weight_map.update(dict.fromkeys((t.name for t in tensors), shard))
    total = sum(t.nbytes for tensors in shards for t in tensors)
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=1))
    config = {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "hidden_size": hidden,
        "num_hidden_layers": MTP_LAYER,
        "num_nextn_predict_layers": 1,
        "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
    }
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    outputs = [t for t in mtp if not t.name.endswith("_scale_inv")]
    return SyntheticCheckpointInfo(
        folder=folder,
        total_bytes=total,
        mtp_bytes=sum(t.nbytes for t in mtp),
        mtp_fp8_bytes=sum(t.nbytes for t in outputs if t.dtype == "F8_E4M3"),
        mtp_tensor_count=len(outputs),
        output_bytes=sum(math.prod(t.shape) * 2 for t in outputs),
    )


def _by_name(tensor: OutputTensor) -> str:
    return tensor.name


def _pools(rng: np.random.Generator) -> dict[str, np.ndarray]:
    codes = rng.integers(0, 256, size=_POOL_BYTES, dtype=np.uint8)
    codes[(codes & 0x7F) == 0x7F] &= 0xFE  # no NaN codes in real weights
    bf16 = (rng.standard_normal(_POOL_BYTES // 2, dtype=np.float32) * 0.02).view(np.uint32)
    return {"F8_E4M3": codes, "BF16": (bf16 >> 16).astype(np.uint16).view(np.uint8)}


def _write_shard(
    path: Path, tensors: list[OutputTensor], pools: dict[str, np.ndarray], rng: np.random.Generator
) -> None:
    with SafetensorsStreamWriter(path, tensors, {"format": "pt"}) as writer:
        for tensor in tensors:
            if tensor.dtype == "F32":  # scale_inv = amax / 448 for weights of amax ~ 0.01–1
                scales = rng.uniform(2e-5, 2e-3, size=math.prod(tensor.shape)).astype("<f4")
                writer.write(scales)
                continue
            pool = pools[tensor.dtype]
            remaining = tensor.nbytes
            while remaining:
                count = min(remaining, _CHUNK)
                start = int(rng.integers(0, pool.size - count + 1)) & ~1
                writer.write(pool[start : start + count])
                remaining -= count
        writer.commit()
