"""The demo's FP8 release (made by tools/demo_model/export_fp8.py) converted once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.convert.job import ConvertRequest, convert_checkpoint
from app.engine.runtime.core.demo_model import MODELS_DIR

FP8_DEMO = MODELS_DIR / "demo-mtp-fp8"
BF16_DEMO = MODELS_DIR / "demo-mtp-hf"


@pytest.fixture(scope="session")
def bf16_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("converted") / "demo-mtp-bf16"
    convert_checkpoint(ConvertRequest(FP8_DEMO, out))
    return out


@pytest.fixture(scope="session")
def mlx_4bit_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("converted") / "demo-mtp-mlx-4bit"
    convert_checkpoint(ConvertRequest(FP8_DEMO, out, q_bits=4))
    return out
