"""FP8 → BF16 → 4-bit MLX in one job: the quantised copy loads in the MLX backend with the MTP
head kept beside it, and replies with MTP drafting (accepted drafts, the same tokens as plain
greedy decoding)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.engine.runtime.backends.mlx.backend import MlxBackend
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.request import GenerationRequest, GenerationResult
from app.engine.runtime.sampling.sampler import SamplerSettings
from app.engine.runtime.speculative.generation import generate

PROMPT = "Write a Python function that adds two numbers."


def _reply(backend: MlxBackend, depth: int) -> GenerationResult:
    request = GenerationRequest(
        messages=(ChatMessage("user", PROMPT),),
        max_tokens=16,
        sampler=SamplerSettings(temperature=0.0),
        mtp_depth=depth,
    )
    return generate(backend, request, emit=lambda _chunk: None, cancelled=lambda: False)


@pytest.mark.slow
def test_the_4bit_copy_loads_with_its_mtp_head_and_drafts(mlx_4bit_copy: Path) -> None:
    config = json.loads((mlx_4bit_copy / "config.json").read_text())
    assert config["quantization"]["bits"] == 4  # mlx-lm's own, not the FP8 one
    assert (mlx_4bit_copy / "mtp.safetensors").is_file()
    assert [p.name for p in mlx_4bit_copy.parent.iterdir()] == [mlx_4bit_copy.name]
    backend = MlxBackend(mlx_4bit_copy, LoadSettings(), mlx_4bit_copy / "mtp.safetensors")
    try:
        assert backend.info.mtp_layers == 1, backend.info.mtp_unavailable_reason
        plain = _reply(backend, 0)
        drafted = _reply(backend, 2)
    finally:
        backend.close()
    assert plain.text.strip()
    assert drafted.token_ids == plain.token_ids
    assert drafted.stats.accepted_by_depth[0] > 0
