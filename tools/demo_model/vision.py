"""The vision demo's checkpoint: a small Qwen3.5 trunk, its MTP layer and a Qwen3.5 vision tower.

Real Qwen3.5 releases are ``Qwen3_5ForConditionalGeneration`` checkpoints: the language model
under ``model.language_model.*``, the vision tower under ``model.visual.*``, the MTP layer under
``mtp.*``, and a ``config.json`` with ``text_config``, ``vision_config`` and the ids of the vision
tokens. llama.cpp's converter turns one such checkpoint into two files: the trunk (``qwen35``,
with its nextn block) and, with ``--mmproj``, the projector (``clip``, projector type
``qwen3vl_merger``). This module writes that checkpoint from a trained :class:`DemoMtpModel` and
a vision tower initialised at random by transformers (seeded): the tower is not trained, so the
model "sees" an image as a fixed random code of its pixels — enough to test that images flow
through every runtime exactly, not to describe them.

The tokenizer is the demo's BPE with Qwen's four vision tokens appended (ids 4096–4099), and the
chat template renders a message's content either as a string or as Qwen's list of ``text`` /
``image`` items (``<|vision_start|><|image_pad|><|vision_end|>``), as Qwen3.5's own template does.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import AddedToken, Tokenizer
from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration, Qwen3_5VisionConfig
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5VisionModel

from demo_model.files import publish, staging_path
from demo_model.model import DemoMtpModel
from demo_model.tokenizer import (
    END_OF_TEXT,
    IM_END,
    SPECIAL_TOKENS,
    special_token_id,
    write_tokenizer_files,
)

VISION_START = "<|vision_start|>"
VISION_END = "<|vision_end|>"
IMAGE_PAD = "<|image_pad|>"
VIDEO_PAD = "<|video_pad|>"
VISION_TOKENS = (VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD)
WEIGHTS_FILE = "model.safetensors"

VISION_CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}"
    "{%- else %}{%- for item in message['content'] %}"
    "{%- if item['type'] == 'image' or 'image' in item %}"
    "{{- '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{%- elif item['type'] == 'text' %}{{- item['text'] }}{%- endif %}"
    "{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


@dataclass(frozen=True)
class VisionShape:
    """The vision tower's size. Patches of 16 px merged 2×2: one image token per 32×32 pixels."""

    depth: int = 2
    hidden_size: int = 64
    intermediate_size: int = 128
    num_heads: int = 2
    patch_size: int = 16
    temporal_patch_size: int = 2  # llama.cpp's converter requires 2 (Qwen's value)
    spatial_merge_size: int = 2
    num_position_embeddings: int = 256  # a 16×16 grid, interpolated to the image's own


def vision_tokenizer(base: Tokenizer) -> Tokenizer:
    """``base`` with the vision tokens appended as special tokens (ids right after its vocab)."""
    tokenizer = Tokenizer.from_str(base.to_str())
    first = tokenizer.get_vocab_size()
    tokenizer.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t in VISION_TOKENS]
    )
    ids = [tokenizer.token_to_id(token) for token in VISION_TOKENS]
    if ids != list(range(first, first + len(VISION_TOKENS))):
        raise ValueError(f"the vision tokens got ids {ids}, expected {first}… in order")
    return tokenizer


def vision_config(shape: VisionShape, out_hidden_size: int) -> Qwen3_5VisionConfig:
    return Qwen3_5VisionConfig(
        depth=shape.depth,
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_heads=shape.num_heads,
        patch_size=shape.patch_size,
        temporal_patch_size=shape.temporal_patch_size,
        spatial_merge_size=shape.spatial_merge_size,
        num_position_embeddings=shape.num_position_embeddings,
        out_hidden_size=out_hidden_size,
        in_channels=3,
    )


def random_vision_tower(config: Qwen3_5VisionConfig, seed: int) -> dict[str, torch.Tensor]:
    """A freshly initialised tower (transformers' own initialisation, seeded), by release name."""
    torch.manual_seed(seed)
    tower = Qwen3_5VisionModel._from_config(config, dtype=torch.float32)
    return {f"model.visual.{name}": value for name, value in tower.state_dict().items()}


def release_config(model: DemoMtpModel, tokenizer: Tokenizer, vision: Qwen3_5VisionConfig) -> dict:
    """config.json of a Qwen3.5 multimodal release for ``model`` with ``vision``."""
    text = copy.deepcopy(model.config)
    text.dtype = torch.bfloat16
    text_dict = text.to_dict()
    text_dict.pop("architectures", None)
    config = Qwen3_5Config(
        text_config=text_dict,
        vision_config=vision.to_dict(),
        image_token_id=special_token_id(tokenizer, IMAGE_PAD),
        video_token_id=special_token_id(tokenizer, VIDEO_PAD),
        vision_start_token_id=special_token_id(tokenizer, VISION_START),
        vision_end_token_id=special_token_id(tokenizer, VISION_END),
        tie_word_embeddings=False,
    )
    config.architectures = ["Qwen3_5ForConditionalGeneration"]
    config.dtype = torch.bfloat16
    return config.to_dict()


def release_tensors(
    model: DemoMtpModel, visual: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Every tensor under its release name in BF16: the trunk moved under
    ``model.language_model.``, ``lm_head`` and ``mtp.*`` as they are, the tower beside them."""
    tensors: dict[str, torch.Tensor] = {}
    for name, value in model.release_state_dict().items():
        if name.startswith("model."):
            name = "model.language_model." + name.removeprefix("model.")
        tensors[name] = value
    tensors.update(visual)
    return {
        name: tensors[name].detach().to(torch.bfloat16).contiguous() for name in sorted(tensors)
    }


def write_vision_checkpoint(
    model: DemoMtpModel,
    visual: dict[str, torch.Tensor],
    vision: Qwen3_5VisionConfig,
    tokenizer: Tokenizer,
    directory: Path,
) -> None:
    """The whole release in ``directory``, replacing it only once complete."""
    staging = staging_path(directory)
    staging.mkdir(parents=True)
    config = release_config(model, tokenizer, vision)
    (staging / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    stop_ids = [special_token_id(tokenizer, IM_END), special_token_id(tokenizer, END_OF_TEXT)]
    generation = {"eos_token_id": stop_ids, "pad_token_id": stop_ids[1], "do_sample": False}
    (staging / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    write_tokenizer_files(
        tokenizer,
        staging,
        max_length=model.config.max_position_embeddings,
        special_tokens=(*SPECIAL_TOKENS, *VISION_TOKENS),
        chat_template=VISION_CHAT_TEMPLATE,
    )
    (staging / "preprocessor_config.json").write_text(
        json.dumps(preprocessor_config(vision), indent=2) + "\n"
    )
    save_file(
        release_tensors(model, visual), str(staging / WEIGHTS_FILE), metadata={"format": "pt"}
    )
    publish(staging, directory)


def preprocessor_config(vision: Qwen3_5VisionConfig) -> dict:
    """Qwen3.5's image processor settings (pixels scaled to [-1, 1]) for this tower's patches."""
    return {
        "image_processor_type": "Qwen2VLImageProcessorFast",
        "processor_class": "Qwen3VLProcessor",
        "patch_size": vision.patch_size,
        "temporal_patch_size": vision.temporal_patch_size,
        "merge_size": vision.spatial_merge_size,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "size": {"shortest_edge": 65_536, "longest_edge": 16_777_216},
    }


@torch.no_grad()
def reload_difference(model: DemoMtpModel, directory: Path, tokens: list[int]) -> float:
    """Max |logit difference| on text between ``model`` (BF16-rounded) and the multimodal
    checkpoint as transformers reloads it: proves the names and config make the same trunk."""
    reloaded = Qwen3_5ForConditionalGeneration.from_pretrained(directory, dtype=torch.float32)
    batch = torch.tensor([tokens])
    expected = model.logits(model.trunk_states(batch))
    return float((reloaded.eval()(input_ids=batch).logits - expected).abs().max())
