"""The same weights as an FP8 block-quantised, sharded checkpoint: a stand-in "original release".

Real MTP models are often published first as FP8 (DeepSeek V3/R1, Qwen's -FP8 repos), and the
sidecar extractor must dequantise their `mtp.*` tensors. Nothing can be downloaded here, so this
writes a small release in that exact format for tests: every linear weight as F8_E4M3 with a F32
`weight_scale_inv` per 128×128 tile (DeepSeek's rule: s = amax/448, q = x/s, so dequantisation is
q·s — docs/formats.md#dequantisation), embeddings, lm_head, norms and other small tensors in BF16,
spread over a few shards with a `model.safetensors.index.json`, and `quantization_config` in
`config.json`.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer

from demo_model.export_hf import bf16_state_dict, write_config_files
from demo_model.files import publish, staging_path
from demo_model.model import DemoMtpModel

BLOCK = 128
E4M3_MAX = 448.0
NOT_QUANTISED = ("model.embed_tokens.weight", "lm_head.weight")
INDEX_FILE = "model.safetensors.index.json"


def is_quantised(name: str, tensor: torch.Tensor) -> bool:
    """Linear weights are FP8; embeddings, lm_head, norms, conv kernels and vectors stay BF16."""
    return tensor.ndim == 2 and name.endswith(".weight") and name not in NOT_QUANTISED


def quantise_block_fp8(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(E4M3 weight, F32 scale_inv [ceil(R/128), ceil(C/128)]) with weight ≈ q · scale per tile."""
    rows, cols = weight.shape
    tiles_r, tiles_c = -(-rows // BLOCK), -(-cols // BLOCK)
    padded = torch.zeros(tiles_r * BLOCK, tiles_c * BLOCK, dtype=torch.float32)
    padded[:rows, :cols] = weight.float()
    tiles = padded.view(tiles_r, BLOCK, tiles_c, BLOCK)
    amax = tiles.abs().amax(dim=(1, 3))
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
    quantised = (tiles / scale[:, None, :, None]).clamp(-E4M3_MAX, E4M3_MAX)
    quantised = quantised.view_as(padded)[:rows, :cols].to(torch.float8_e4m3fn)
    return quantised.contiguous(), scale.contiguous()


def fp8_tensors(model: DemoMtpModel) -> dict[str, torch.Tensor]:
    """The release's tensors: the BF16 checkpoint's, linear weights replaced by FP8 + scales."""
    tensors: dict[str, torch.Tensor] = {}
    for name, tensor in bf16_state_dict(model).items():
        if is_quantised(name, tensor):
            tensors[name], tensors[f"{name}_scale_inv"] = quantise_block_fp8(tensor)
        else:
            tensors[name] = tensor
    return tensors


def _byte_size(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def shard(tensors: dict[str, torch.Tensor], shards: int) -> list[dict[str, torch.Tensor]]:
    """Split in name order into ``shards`` parts of similar byte size (a weight and its scale
    stay together, since a scale's name sorts right after its weight's)."""
    total = sum(_byte_size(t) for t in tensors.values())
    parts: list[dict[str, torch.Tensor]] = [{} for _ in range(shards)]
    written = 0
    for name in sorted(tensors):
        index = min(shards - 1, written * shards // total)
        if name.endswith("_scale_inv"):
            index = next(
                i for i, part in enumerate(parts) if name.removesuffix("_scale_inv") in part
            )
        parts[index][name] = tensors[name]
        written += _byte_size(tensors[name])
    return parts


def write_fp8_release(
    model: DemoMtpModel, tokenizer: Tokenizer, directory: Path, shards: int = 3
) -> None:
    """Write the sharded FP8 release to ``directory``, replacing it only once complete."""
    staging = staging_path(directory)
    staging.mkdir(parents=True)
    write_config_files(model, tokenizer, staging)
    config_path = staging / "config.json"
    config = json.loads(config_path.read_text())
    config["quantization_config"] = {
        "quant_method": "fp8",
        "fmt": "e4m3",
        "activation_scheme": "dynamic",
        "weight_block_size": [BLOCK, BLOCK],
        "modules_to_not_convert": [name.removesuffix(".weight") for name in NOT_QUANTISED],
    }
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")

    tensors = fp8_tensors(model)
    weight_map: dict[str, str] = {}
    for number, part in enumerate(shard(tensors, shards), start=1):
        file_name = f"model-{number:05d}-of-{shards:05d}.safetensors"
        save_file(part, str(staging / file_name), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, file_name))
    index = {
        "metadata": {"total_size": sum(_byte_size(t) for t in tensors.values())},
        "weight_map": dict(sorted(weight_map.items())),
    }
    (staging / INDEX_FILE).write_text(json.dumps(index, indent=2) + "\n")
    publish(staging, directory)
