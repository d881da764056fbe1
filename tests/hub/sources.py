"""Source repos for the Hub tests: synthetic checkpoints with a model card, put on the local hub.

The two families of the issue: a sharded FP8 DeepSeek-V3-style checkpoint (F32 ``_scale_inv``
tiles, NextN layer) and a BF16 Qwen3.5-style one (``mtp.*``), each with a README whose front
matter carries the license fields a sidecar must inherit.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.engine.mtp import LocalFolderSource, extract_mtp
from tests.localhub import LocalHub
from tests.mtp.checkpoints import (
    Spec,
    SyntheticCheckpoint,
    build_deepseek_v3,
    build_qwen35,
    write_checkpoint,
)

DEEPSEEK_CARD = (
    "---\nlicense: other\nlicense_name: deepseek\nlicense_link: LICENSE-MODEL\n"
    "library_name: transformers\n---\n# DeepSeek-V3 (synthetic)\n"
)
QWEN_CARD = (
    "---\nlicense: apache-2.0\n"
    "license_link: https://huggingface.co/Qwen/Qwen3-6B/blob/main/LICENSE\n"
    "pipeline_tag: text-generation\n---\n# Qwen3-6B (synthetic)\n"
)


@dataclass(frozen=True)
class SourceFamily:
    repo_id: str
    sidecar_repo: str
    build: Callable[[Path], SyntheticCheckpoint]
    card: str
    licence: dict[str, str]


FAMILIES = {
    "deepseek-fp8": SourceFamily(
        "deepseek-ai/DeepSeek-V3",
        "acme/deepseek-v3-mtp",
        build_deepseek_v3,
        DEEPSEEK_CARD,
        {"license": "other", "license_name": "deepseek", "license_link": "LICENSE-MODEL"},
    ),
    "qwen-bf16": SourceFamily(
        "Qwen/Qwen3-6B",
        "acme/qwen3-6b-mtp",
        build_qwen35,
        QWEN_CARD,
        {
            "license": "apache-2.0",
            "license_link": "https://huggingface.co/Qwen/Qwen3-6B/blob/main/LICENSE",
        },
    ),
}


def seed_source(hub: LocalHub, family: SourceFamily, folder: Path) -> SyntheticCheckpoint:
    """Build the family's checkpoint in ``folder``, add its card, and commit it to the hub."""
    checkpoint = family.build(folder)
    (folder / "README.md").write_text(family.card)
    hub.seed_folder(family.repo_id, folder, "Upload checkpoint")
    return checkpoint


def seed_trunk_only(hub: LocalHub, repo_id: str, folder: Path) -> None:
    """A checkpoint without any MTP head (like an mlx-converted copy)."""
    trunk = [
        Spec("model.embed_tokens.weight", (64, 32), "BF16"),
        Spec("model.layers.0.mlp.down_proj.weight", (32, 48), "BF16"),
        Spec("model.norm.weight", (32,), "BF16", "norm"),
    ]
    config = {"model_type": "qwen3", "num_hidden_layers": 1, "hidden_size": 32}
    write_checkpoint(folder, layout="", layer_indices=(), config=config, trunk=trunk, mtp=[])
    hub.seed_folder(repo_id, folder, "Upload converted checkpoint")


def local_extraction(folder: Path, out: Path) -> Path:
    """The sidecar extracted from the checkpoint folder itself (the reference)."""
    return extract_mtp(LocalFolderSource(folder), out).out_path


@dataclass(frozen=True)
class SidecarFile:
    """A safetensors file split into what a comparison needs (read with the stdlib only)."""

    metadata: dict[str, str]
    tensors: dict[str, dict]  # name -> {"dtype", "shape", "data_offsets"}
    data: bytes


def read_sidecar(path: Path | bytes) -> SidecarFile:
    raw = path if isinstance(path, bytes) else Path(path).read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + length])
    metadata = header.pop("__metadata__", {})
    return SidecarFile(metadata, header, raw[8 + length :])
