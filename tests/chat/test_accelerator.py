"""The backend indicator: what runs, the best the machine offers, and why they differ."""

from __future__ import annotations

import llama_cpp

from app.engine.chat.accelerator import (
    CPU,
    CUDA,
    METAL,
    MachineAccelerators,
    assess,
    detect_machine,
    probe_in_subprocess,
)

CPU_BUILD = "CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | OPENMP = 1 | REPACK = 1 |"
CUDA_BUILD = "CUDA : ARCHS = 900 | USE_GRAPHS = 1 | PEER_MAX_BATCH_SIZE = 128 | " + CPU_BUILD
METAL_BUILD = "Metal : EMBED_LIBRARY = 1 | BF16 = 1 | " + CPU_BUILD
NVIDIA_BOX = MachineAccelerators(nvidia_gpu=True, apple_silicon=False, amd_gpu=False)
MAC = MachineAccelerators(nvidia_gpu=False, apple_silicon=True, amd_gpu=False)
PLAIN_PC = MachineAccelerators(nvidia_gpu=False, apple_silicon=False, amd_gpu=False)


def test_an_nvidia_machine_with_a_cpu_build_says_how_to_get_cuda() -> None:
    report = assess(NVIDIA_BOX, gpu_offload=False, system_info=CPU_BUILD)
    assert (report.running, report.best) == (CPU, CUDA)
    assert report.reason == (
        "this machine has an NVIDIA GPU but llama-cpp-python was built without CUDA, so models "
        'run on the CPU; rebuild it with CMAKE_ARGS="-DGGML_CUDA=on" pip install '
        "--force-reinstall --no-cache-dir llama-cpp-python"
    )


def test_the_best_backend_running_needs_no_explanation() -> None:
    cuda = assess(NVIDIA_BOX, gpu_offload=True, system_info=CUDA_BUILD)
    assert (cuda.running, cuda.reason, cuda.gpu_backends_built) == (CUDA, None, (CUDA,))
    metal = assess(MAC, gpu_offload=True, system_info=METAL_BUILD)
    assert (metal.running, metal.reason) == (METAL, None)
    assert metal.summary == "Metal (llama.cpp)"


def test_a_mac_with_a_build_without_metal_says_so() -> None:
    report = assess(MAC, gpu_offload=False, system_info=CPU_BUILD)
    assert report.reason is not None
    assert "Apple silicon (Metal) but llama-cpp-python was built without Metal" in report.reason
    assert 'CMAKE_ARGS="-DGGML_METAL=on"' in report.reason


def test_a_machine_without_gpu_explains_the_cpu() -> None:
    report = assess(PLAIN_PC, gpu_offload=False, system_info=CPU_BUILD)
    assert report.running == report.best == CPU
    assert report.reason is not None and report.reason.startswith("no supported GPU was found")


def test_the_installed_llama_cpp_is_probed_in_a_separate_process() -> None:
    report = probe_in_subprocess()
    assert report.system_info == llama_cpp.llama_print_system_info().decode().strip()
    assert report.best == detect_machine().best
    assert (report.running == CPU) == (not llama_cpp.llama_supports_gpu_offload())
    if report.running == CPU and report.best != CPU:
        assert report.reason is not None and "built without" in report.reason
