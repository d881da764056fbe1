"""The demo model as a Hugging Face checkpoint, laid out like a real Qwen3.5 release.

This is the checkpoint the rest of the project treats as "the original": the MTP extractor reads
its `mtp.*` tensors, the MLX backend loads its trunk with mlx-lm and its head from the sidecar, and
llama.cpp's converter turns it into the GGUF. So it must look like a release: `config.json` with
`mtp_num_hidden_layers`, BF16 safetensors, RMSNorm weights stored as offsets from 1 (the model
computes x·(1+w); only the gated-delta-net's own norm is absolute, as in Qwen's files), the
tokenizer files with the chat template, and a generation config that stops at <|im_end|>.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import torch
from demo_model.files import publish, staging_path
from demo_model.model import DemoMtpModel
from demo_model.tokenizer import END_OF_TEXT, IM_END, special_token_id, write_tokenizer_files
from safetensors.torch import save_file
from tokenizers import Tokenizer

WEIGHTS_FILE = "model.safetensors"


def bf16_state_dict(model: DemoMtpModel) -> dict[str, torch.Tensor]:
    """Every release tensor in BF16 (round to nearest even), contiguous, sorted by name."""
    tensors = model.release_state_dict()
    return {
        name: tensors[name].detach().to(torch.bfloat16).contiguous() for name in sorted(tensors)
    }


def write_config_files(model: DemoMtpModel, tokenizer: Tokenizer, directory: Path) -> None:
    """config.json, generation_config.json and the tokenizer files."""
    config = copy.deepcopy(model.config)
    config.dtype = torch.bfloat16
    config.save_pretrained(directory)
    stop_ids = [special_token_id(tokenizer, IM_END), special_token_id(tokenizer, END_OF_TEXT)]
    generation = {
        "eos_token_id": stop_ids,
        "pad_token_id": special_token_id(tokenizer, END_OF_TEXT),
        "do_sample": True,
        "temperature": 0.6,
        "top_p": 0.95,
        "top_k": 20,
    }
    (directory / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    write_tokenizer_files(tokenizer, directory, max_length=config.max_position_embeddings)


def write_hf_checkpoint(model: DemoMtpModel, tokenizer: Tokenizer, directory: Path) -> None:
    """Write the BF16 checkpoint to ``directory``, replacing it only once complete."""
    staging = staging_path(directory)
    staging.mkdir(parents=True)
    write_config_files(model, tokenizer, staging)
    save_file(bf16_state_dict(model), str(staging / WEIGHTS_FILE), metadata={"format": "pt"})
    publish(staging, directory)
