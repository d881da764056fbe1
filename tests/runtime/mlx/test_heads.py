"""Where the MLX backend's MTP head comes from, and the head families it builds.

- the BF16 Hugging Face folder runs MTP from its own ``mtp.*`` tensors, no sidecar;
- Qwen's offset-style norms are detected, not assumed: a sidecar whose norms already hold the
  1 gives the same drafts as the raw one;
- heads on tiny random models made with mlx-lm's classes, loaded from sidecars stored as those
  releases store their MTP layer: Qwen3-Next (MoE, per-expert tensors, offset norms) and
  DeepSeek-V3 / GLM-4.5 (NextN).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

from app.engine.runtime.backends.mlx.backend import MlxBackend
from app.engine.runtime.core.request import GenerationRequest
from app.engine.runtime.sampling.sampler import SamplerSettings, greedy_token
from app.engine.runtime.speculative.generation import generate
from tests.runtime.draft_rows import draft_rows
from tests.runtime.mlx.conftest import DEMO_HF, SETTINGS, MlxDemo
from tests.runtime.mlx.tiny_models import (
    DEEPSEEK_V3,
    GLM4_MOE,
    QWEN3_NEXT,
    write_nextn_sidecar,
    write_qwen_sidecar,
    write_tiny_folder,
)

GREEDY = SamplerSettings(temperature=0.0)


def _tokens(backend: MlxBackend, prompt: str, depth: int, tokens: int) -> tuple:
    request = GenerationRequest(prompt=prompt, max_tokens=tokens, sampler=GREEDY, mtp_depth=depth)
    return generate(backend, request, emit=lambda _c: None, cancelled=lambda: False)


def test_the_bf16_folder_runs_mtp_from_its_own_tensors() -> None:
    backend = MlxBackend(DEMO_HF, SETTINGS)
    assert backend.info.mtp_available and backend.info.mtp_layers == 1
    plain = _tokens(backend, "def add(a, b):\n", 0, 12)
    mtp = _tokens(backend, "def add(a, b):\n", 2, 12)
    assert mtp.token_ids == plain.token_ids
    assert mtp.stats.acceptance_by_depth[0] > 0.5  # a trained head, norms offset-corrected


@pytest.mark.slow
def test_offset_norms_are_detected_rather_than_assumed(mlx_demo: MlxDemo, tmp_path: Path) -> None:
    raw = mx.load(str(mlx_demo.sidecar))
    assert np.mean(np.array(raw["mtp.norm.weight"].astype(mx.float32))) < 0.5  # offset style
    absolute = {
        name: (value.astype(mx.float32) + 1.0).astype(value.dtype)
        if value.ndim == 1 and "norm" in name
        else value
        for name, value in raw.items()
    }
    converted = tmp_path / "mtp.safetensors"
    mx.save_safetensors(str(converted), absolute)

    def first_draft_row(sidecar: Path) -> np.ndarray:
        backend = MlxBackend(mlx_demo.four_bit, SETTINGS, sidecar)
        tokens = backend.tokenize("The lighthouse keeper", parse_special=False)
        last = greedy_token(backend.prefill(tokens, with_mtp=True))
        return draft_rows(backend, last, 1)[1][0]

    from_raw, from_absolute = first_draft_row(mlx_demo.sidecar), first_draft_row(converted)
    assert np.argmax(from_raw) == np.argmax(from_absolute)
    assert np.max(np.abs(from_raw - from_absolute)) < 0.1  # BF16 rounding of 1 + w only


@pytest.mark.parametrize(
    ("config", "write_sidecar"),
    [
        (QWEN3_NEXT, write_qwen_sidecar),
        (DEEPSEEK_V3, write_nextn_sidecar),
        (GLM4_MOE, write_nextn_sidecar),
    ],
    ids=["qwen3_next", "deepseek_v3", "glm4_moe"],
)
def test_a_moe_head_drafts_and_greedy_output_equals_plain(
    config: dict, write_sidecar: Callable[[Path, dict], Path], tmp_path: Path
) -> None:
    folder = write_tiny_folder(tmp_path / config["model_type"], config)
    sidecar = write_sidecar(tmp_path / "mtp.safetensors", config)
    backend = MlxBackend(folder, SETTINGS, sidecar)
    assert backend.info.mtp_available, backend.info.mtp_unavailable_reason
    assert backend.info.architecture == config["model_type"]
    plain = _tokens(backend, "Once upon a time", 0, 12)
    for depth in (1, 3):
        mtp = _tokens(backend, "Once upon a time", depth, 12)
        assert mtp.token_ids == plain.token_ids
        assert sum(mtp.stats.drafted_by_depth) > 0
