"""Tiny random model folders made with mlx-lm's own classes, and MTP sidecars for them.

The trunk is saved as mlx-lm saves models (config.json + model.safetensors, the demo model's
tokenizer beside them). A NextN sidecar is written the way a DeepSeek/GLM release stores its
MTP layer: ``model.layers.{N}.*`` with per-expert tensors and, for DeepSeek, the fused
``kv_b_proj`` — so loading it exercises the same conversions a real checkpoint needs.
"""

from __future__ import annotations

import importlib
import json
import shutil
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten

from app.engine.runtime.core.demo_model import MODELS_DIR

DEMO_HF = MODELS_DIR / "demo-mtp-hf"
VOCAB = 4096  # the demo tokenizer's

DEEPSEEK_V3 = {
    "model_type": "deepseek_v3",
    "vocab_size": VOCAB,
    "hidden_size": 64,
    "intermediate_size": 128,
    "moe_intermediate_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "n_shared_experts": 1,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "kv_lora_rank": 32,
    "q_lora_rank": 32,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 16,
    "v_head_dim": 16,
    "first_k_dense_replace": 1,
    "max_position_embeddings": 1024,
    "num_nextn_predict_layers": 1,
}
GLM4_MOE = {
    "model_type": "glm4_moe",
    "vocab_size": VOCAB,
    "hidden_size": 64,
    "intermediate_size": 128,
    "max_position_embeddings": 1024,
    "moe_intermediate_size": 32,
    "norm_topk_prob": True,
    "num_attention_heads": 4,
    "n_group": 1,
    "head_dim": 16,
    "topk_group": 1,
    "n_shared_experts": 1,
    "n_routed_experts": 4,
    "routed_scaling_factor": 1.0,
    "num_experts_per_tok": 2,
    "first_k_dense_replace": 1,
    "num_hidden_layers": 2,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "rope_scaling": None,
    "use_qk_norm": True,
    "tie_word_embeddings": False,
    "attention_bias": False,
    "partial_rotary_factor": 0.5,
    "num_nextn_predict_layers": 1,
}
QWEN3_NEXT = {
    "model_type": "qwen3_next",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "linear_num_value_heads": 4,
    "linear_num_key_heads": 2,
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    "linear_conv_kernel_dim": 4,
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "decoder_sparse_step": 1,
    "shared_expert_intermediate_size": 32,
    "mlp_only_layers": [],
    "moe_intermediate_size": 32,
    "rms_norm_eps": 1e-6,
    "vocab_size": VOCAB,
    "num_key_value_heads": 2,
    "rope_theta": 10000.0,
    "partial_rotary_factor": 0.25,
    "max_position_embeddings": 1024,
    "head_dim": 16,
    "full_attention_interval": 2,
}
LLAMA = {
    "model_type": "llama",
    "vocab_size": VOCAB,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-5,
    "max_position_embeddings": 1024,
    "tie_word_embeddings": False,
}


def _module(model_type: str) -> Any:
    return importlib.import_module(f"mlx_lm.models.{model_type}")


def write_tiny_folder(folder: Path, config: dict[str, Any], seed: int = 0) -> Path:
    """A random mlx-lm model of ``config`` saved in ``folder`` with the demo's tokenizer."""
    mx.random.seed(seed)
    module = _module(config["model_type"])
    model = module.Model(module.ModelArgs.from_dict(config))
    folder.mkdir(parents=True)
    mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(model.parameters())))
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(DEMO_HF / name, folder / name)
    return folder


def write_nextn_sidecar(path: Path, config: dict[str, Any], seed: int = 1) -> Path:
    """A random NextN MTP layer for ``config``, named and shaped as the release stores it."""
    mx.random.seed(seed)
    module = _module(config["model_type"])
    args = module.ModelArgs.from_dict(config)
    index = args.num_hidden_layers
    decoder_class = next(
        value
        for name, value in vars(module).items()
        if name.endswith("DecoderLayer") and isinstance(value, type)
    )
    block: nn.Module = decoder_class(args, index)
    hidden = args.hidden_size
    tensors: dict[str, mx.array] = {
        "enorm.weight": mx.ones((hidden,)),
        "hnorm.weight": mx.ones((hidden,)),
        "eh_proj.weight": mx.random.normal((hidden, 2 * hidden)) * (2 * hidden) ** -0.5,
        "shared_head.norm.weight": mx.ones((hidden,)),
    }
    parameters = dict(tree_flatten(block.parameters()))
    for name, value in parameters.items():
        if name.endswith("self_attn.embed_q.weight"):
            unembed = parameters[name.replace("embed_q", "unembed_out")]
            fused = mx.concatenate([value.swapaxes(-1, -2), unembed], axis=1)
            tensors[name.replace("embed_q", "kv_b_proj")] = fused.reshape(-1, fused.shape[-1])
        else:
            tensors.update(_release_names(name, value))
    prefix = f"model.layers.{index}."
    mx.save_safetensors(
        str(path),
        {prefix + name: value.astype(mx.bfloat16) for name, value in tensors.items()},
        metadata={"mtp_layout": "deepseek-nextn", "mtp_layer_indices": str(index)},
    )
    return path


def write_qwen_sidecar(path: Path, config: dict[str, Any], seed: int = 1) -> Path:
    """A random Qwen-style ``mtp.*`` head for ``config`` as a raw checkpoint stores it: per-expert
    tensors and RMSNorm weights as offsets from 1."""
    mx.random.seed(seed)
    module = _module(config["model_type"])
    args = module.ModelArgs.from_dict(config)
    attention_index = args.full_attention_interval - 1
    decoder_class = next(
        value
        for name, value in vars(module).items()
        if name.endswith("DecoderLayer") and isinstance(value, type)
    )
    layer: nn.Module = decoder_class(args, attention_index)
    hidden = args.hidden_size
    tensors = {
        "fc.weight": mx.random.normal((hidden, 2 * hidden)) * (2 * hidden) ** -0.5,
        **{
            f"{norm}.weight": mx.zeros((hidden,))
            for norm in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm")
        },
    }
    for name, value in tree_flatten(layer.parameters()):
        for stored, tensor in _release_names(name, value).items():
            offset = tensor.ndim == 1 and "norm" in stored.split(".")[-2]
            tensors[f"layers.0.{stored}"] = tensor - 1.0 if offset else tensor
    mx.save_safetensors(
        str(path),
        {f"mtp.{name}": value.astype(mx.bfloat16) for name, value in tensors.items()},
        metadata={"mtp_layout": "qwen-mtp"},
    )
    return path


def _release_names(name: str, value: mx.array) -> dict[str, mx.array]:
    """mlx-lm parameter → the checkpoint tensor(s) it is converted from."""
    if ".switch_mlp." in name:
        return {
            name.replace(".switch_mlp.", f".experts.{expert}."): value[expert]
            for expert in range(value.shape[0])
        }
    if name.endswith("self_attn.unembed_out.weight"):
        return {}  # written with embed_q as the fused kv_b_proj
    return {name: value}
