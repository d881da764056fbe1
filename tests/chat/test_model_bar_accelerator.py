"""The model bar's backend line: what the build has, what the machine has, and the fix."""

from __future__ import annotations

from app.engine.chat.accelerator import MachineAccelerators, assess
from app.ui.chat.widgets.model_bar import ModelBar

CPU_BUILD = "CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | OPENMP = 1 | REPACK = 1 |"
NVIDIA_BOX = MachineAccelerators(nvidia_gpu=True, apple_silicon=False, amd_gpu=False)


def test_the_model_bar_says_what_the_build_has_what_the_machine_has_and_the_fix(qtbot) -> None:
    bar = ModelBar()
    qtbot.addWidget(bar)
    bar.set_accelerator(assess(NVIDIA_BOX, False, CPU_BUILD, "0.3.36"))
    text = bar.backend.text()
    assert text.startswith(
        "<b>Backend:</b> CPU (llama.cpp) — built with CPU only; this machine has an NVIDIA GPU "
        "(CUDA) — "
    )
    assert "CMAKE_ARGS=&quot;-DGGML_CUDA=on&quot; pip install" in text
