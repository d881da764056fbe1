"""The chat window with a model folder: it runs on MLX with the sidecar the picker paired.

The demo's Hugging Face checkpoint is converted to 4-bit with ``mlx_lm.convert`` (which drops
its MTP tensors) and the sidecar extracted from the FP8 release is put beside it, as a user who
downloaded an MLX conversion and its ``-mtp`` sidecar would have them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mlx_lm import convert

from app.engine.mtp.extract import extract_mtp
from app.engine.mtp.source import LocalFolderSource
from app.engine.runtime.core.demo_model import MODELS_DIR


@pytest.fixture(scope="module")
def mlx_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("mlx-models") / "demo-mtp-mlx-4bit"
    convert(str(MODELS_DIR / "demo-mtp-hf"), mlx_path=str(folder), quantize=True, q_bits=4)
    extract_mtp(LocalFolderSource(MODELS_DIR / "demo-mtp-fp8"), folder / "mtp.safetensors")
    return folder


@pytest.mark.slow
def test_a_model_folder_loads_on_mlx_with_its_sidecar_and_replies_with_mtp(
    chat, mlx_folder: Path
) -> None:
    window = chat.open()
    chat.load(window, mlx_folder)
    bar = window.model_bar
    assert f"Sidecar paired: {mlx_folder / 'mtp.safetensors'}" in bar.info.text()
    assert bar.backend.text() == "<b>Backend:</b> mlx — a model folder runs on mlx-lm (mlx on CPU)"
    assert bar.picker.currentText() == "Opened: demo-mtp-mlx-4bit"
    window.settings_panel.temperature.setValue(0.0)
    window.settings_panel.max_tokens.setValue(12)
    reply = chat.ask(window, "Write a Python function that adds two numbers.")
    assert reply.text.strip()
    assert (
        "MTP auto depth" in reply.figures.text() and "acceptance by depth" in reply.figures.text()
    )
