""" "Run on a cluster…": model sizes read from names, the tensor-parallel suggestion, the three
launch commands (flags as the engines document them), and the dialog from the catalog's detail
pane copying a command to the clipboard (Qt offscreen)."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import json
import shlex

import pytest
from PySide6.QtGui import QGuiApplication

from app.engine.cluster_launch import launch_commands, parameters_from_name, suggest_parallelism
from app.engine.errors import CatalogError
from app.ui.main_window import MainWindow


def test_parameters_are_read_from_model_names() -> None:
    assert parameters_from_name("Qwen/Qwen3.5-27B") == 27.0
    assert parameters_from_name("Qwen/Qwen3.5-35B-A3B") == 35.0  # total, not the active 3B
    assert parameters_from_name("Qwen/Qwen3.5-397B-A17B") == 397.0
    assert parameters_from_name("HuggingFaceTB/SmolLM2-135M") == 0.135
    assert parameters_from_name("deepseek-ai/DeepSeek-V3") is None  # the user enters it


def test_tensor_parallel_grows_in_powers_of_two_then_spans_machines() -> None:
    assert suggest_parallelism(27, 2.0, 80).tensor_parallel == 1  # 50 GiB fits one 80 GiB GPU
    assert suggest_parallelism(27, 2.0, 24).tensor_parallel == 4  # 60 GiB needs 3 → 4
    large = suggest_parallelism(397, 2.0, 80)  # ~740 GiB of BF16 weights
    assert (large.tensor_parallel, large.nodes, large.gpus) == (8, 2, 16)
    assert suggest_parallelism(397, 1.0, 141).gpus == 4  # FP8 on 141 GiB GPUs
    with pytest.raises(CatalogError, match="GPU memory 0"):
        suggest_parallelism(27, 2.0, 0)


def test_commands_carry_the_documented_mtp_and_parallel_flags() -> None:
    commands = launch_commands(
        "Qwen/Qwen3.5-27B", suggest_parallelism(27, 2.0, 24), 3, gguf_repo="me/Q-GGUF"
    )
    vllm = shlex.split(commands.vllm)
    assert vllm[:3] == ["vllm", "serve", "Qwen/Qwen3.5-27B"]
    assert vllm[vllm.index("--tensor-parallel-size") + 1] == "4"
    config = json.loads(vllm[vllm.index("--speculative-config") + 1])
    assert config == {"method": "mtp", "num_speculative_tokens": 3}
    sglang = shlex.split(commands.sglang)
    assert sglang[sglang.index("--speculative-algorithm") + 1] == "NEXTN"
    assert sglang[sglang.index("--speculative-num-steps") + 1] == "3"
    assert sglang[sglang.index("--speculative-num-draft-tokens") + 1] == "4"
    assert sglang[sglang.index("--tp") + 1] == "4"
    assert commands.llama_server is not None
    llama = shlex.split(commands.llama_server)
    assert llama[llama.index("--spec-type") + 1] == "draft-mtp"
    assert llama[llama.index("-hf") + 1] == "me/Q-GGUF"
    several = launch_commands("Qwen/Qwen3.5-397B-A17B", suggest_parallelism(397, 2.0, 80), 2)
    assert "--pipeline-parallel-size 2" in several.vllm and "--nnodes 2" in several.sglang
    assert several.llama_server is None


def test_dialog_from_the_detail_pane_suggests_and_copies(qtbot, main_window: MainWindow) -> None:
    main_window.browser.select_key("qwen3-5-27b-gguf-q4-k-m")
    detail = main_window.browser.detail
    button = next(b for b in detail.findChildren(type(detail.chat_button)) if "cluster" in b.text())
    button.click()
    dialog = button.dialog
    assert dialog is not None and dialog.isVisible()
    assert dialog.parameters.value() == 27.0
    dialog.gpu_memory.setValue(24)
    assert "tensor-parallel 4" in dialog.suggestion.text()
    assert "--tensor-parallel-size 4" in dialog.command_views["vLLM"].toPlainText()
    llama = dialog.command_views["llama-server"].toPlainText()
    assert "-hf mtp-studio/Qwen3.5-27B-Q4_K_M-GGUF" in llama
    dialog.copy_buttons["SGLang"].click()
    assert QGuiApplication.clipboard().text() == dialog.command_views["SGLang"].toPlainText()
    dialog.close()
