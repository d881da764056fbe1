"""Sidecars of other models for the refusal tests, written as BF16 safetensors like the real one."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

QWEN_HEAD_SHAPES = {
    "mtp.fc.weight": (256, 512),
    "mtp.pre_fc_norm_embedding.weight": (256,),
    "mtp.pre_fc_norm_hidden.weight": (256,),
    "mtp.norm.weight": (256,),
    "mtp.layers.0.input_layernorm.weight": (256,),
    "mtp.layers.0.post_attention_layernorm.weight": (256,),
    "mtp.layers.0.self_attn.q_norm.weight": (64,),
    "mtp.layers.0.self_attn.k_norm.weight": (64,),
    "mtp.layers.0.self_attn.q_proj.weight": (512, 256),
    "mtp.layers.0.self_attn.k_proj.weight": (128, 256),
    "mtp.layers.0.self_attn.v_proj.weight": (128, 256),
    "mtp.layers.0.self_attn.o_proj.weight": (256, 256),
    "mtp.layers.0.mlp.gate_proj.weight": (768, 256),
    "mtp.layers.0.mlp.up_proj.weight": (768, 256),
    "mtp.layers.0.mlp.down_proj.weight": (256, 768),
}
"""The demo model's head: hidden 256, 4 query heads (×2 for the gate), 2 KV heads of 64, FFN 768."""


def bf16(values: np.ndarray) -> np.ndarray:
    """``values`` rounded to BF16 (to nearest even), as float32."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint32) << 16
    return rounded.view(np.float32).reshape(values.shape)


def write_bf16_tensors(path: Path, tensors: dict[str, np.ndarray], layout: str) -> Path:
    """A sidecar holding ``tensors`` in BF16, laid out as the extractor writes one."""
    header: dict[str, object] = {"__metadata__": {"format": "pt", "mtp_layout": layout}}
    blobs, offset = [], 0
    for name, values in tensors.items():
        words = (bf16(values).view(np.uint32) >> 16).astype("<u2").tobytes()
        entry = {"dtype": "BF16", "shape": list(values.shape)}
        header[name] = {**entry, "data_offsets": [offset, offset + len(words)]}
        blobs.append(words)
        offset += len(words)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    return path


def write_bf16_sidecar(path: Path, shapes: dict[str, tuple[int, ...]], seed: int = 0) -> Path:
    """A Qwen sidecar with these tensor shapes: small random values (offset-style norms)."""
    rng = np.random.default_rng(seed)
    tensors = {
        name: rng.normal(0.0, 0.02, size=shape).astype(np.float32) for name, shape in shapes.items()
    }
    return write_bf16_tensors(path, tensors, "qwen-mtp")
