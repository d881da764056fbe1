"""The demo model as a Hugging Face checkpoint, laid out like a real Qwen3.5 release.

This is the checkpoint the rest of the project treats as "the original": the MTP extractor reads
its `mtp.*` tensors, the MLX backend loads its trunk with mlx-lm and its head from the sidecar, and
llama.cpp's converter turns it into the GGUF. So it must look like a release: `config.json` of
model type `qwen3_5` with the text model's settings (`mtp_num_hidden_layers` included) under
`text_config` — the one shape that transformers (`Qwen3_5ForCausalLM`), stock mlx-lm and llama.cpp's
converter all load —, BF16 safetensors, RMSNorm weights stored as offsets from 1 (the model
computes x·(1+w); only the gated-delta-net's own norm is absolute, as in Qwen's files), the
tokenizer files with the chat template, and a generation config that stops at <|im_end|>.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer
from transformers import AutoTokenizer, Qwen3_5ForCausalLM

from demo_model.files import publish, staging_path
from demo_model.model import DemoMtpModel
from demo_model.tokenizer import END_OF_TEXT, IM_END, special_token_id, write_tokenizer_files

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
    config_path = directory / "config.json"
    text_config = json.loads(config_path.read_text())
    release_config = {
        "architectures": text_config.pop("architectures"),
        "model_type": "qwen3_5",
        "text_config": text_config,
        "tie_word_embeddings": text_config["tie_word_embeddings"],
        "dtype": text_config["dtype"],
        "transformers_version": text_config.pop("transformers_version"),
    }
    config_path.write_text(json.dumps(release_config, indent=2) + "\n")
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


@torch.no_grad()
def reload_difference(model: DemoMtpModel, directory: Path, tokens: list[int]) -> float:
    """Max |logit difference| between ``model`` and the checkpoint reloaded by transformers."""
    reloaded = Qwen3_5ForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
    batch = torch.tensor([tokens])
    expected = model.logits(model.trunk_states(batch))
    return float((reloaded(batch).logits - expected).abs().max())


def tokenizer_reload_mismatches(
    directory: Path, tokenizer: Tokenizer, texts: Sequence[str]
) -> tuple[str, ...]:
    """The texts that transformers' tokenizer for the checkpoint splits unlike ``tokenizer``."""
    reloaded = AutoTokenizer.from_pretrained(directory)
    return tuple(
        text
        for text in texts
        if reloaded(text, add_special_tokens=False).input_ids != tokenizer.encode(text).ids
    )


def write_hf_checkpoint(model: DemoMtpModel, tokenizer: Tokenizer, directory: Path) -> None:
    """Write the BF16 checkpoint to ``directory``, replacing it only once complete."""
    staging = staging_path(directory)
    staging.mkdir(parents=True)
    write_config_files(model, tokenizer, staging)
    save_file(bf16_state_dict(model), str(staging / WEIGHTS_FILE), metadata={"format": "pt"})
    publish(staging, directory)
