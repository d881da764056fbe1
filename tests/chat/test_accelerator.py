"""The backend indicator: what runs, the best the machine offers, and why they differ.

Engine only (no Qt), so a GPU machine without PySide6 runs it (bench/device_check.sh); the
model bar's wording of the same assessment is tested in test_model_bar_accelerator.py.
"""

from __future__ import annotations

import shutil
import subprocess

import llama_cpp
import pytest

from app.engine.chat.accelerator import (
    CPU,
    CUDA,
    METAL,
    ROCM,
    VULKAN,
    MachineAccelerators,
    assess,
    detect_machine,
    gpus_in_vulkan_summary,
    probe_in_subprocess,
    vulkan_gpus,
)

CPU_BUILD = "CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | OPENMP = 1 | REPACK = 1 |"
CUDA_BUILD = "CUDA : ARCHS = 900 | USE_GRAPHS = 1 | PEER_MAX_BATCH_SIZE = 128 | " + CPU_BUILD
METAL_BUILD = "Metal : EMBED_LIBRARY = 1 | BF16 = 1 | " + CPU_BUILD
VULKAN_BUILD = "Vulkan : COOPMAT = 1 | " + CPU_BUILD
ROCM_BUILD = "ROCm : NO_VMM = 1 | PEER_MAX_BATCH_SIZE = 128 | " + CPU_BUILD
VERSION = "0.3.36"
NVIDIA_BOX = MachineAccelerators(nvidia_gpu=True, apple_silicon=False, amd_gpu=False)
MAC = MachineAccelerators(nvidia_gpu=False, apple_silicon=True, amd_gpu=False)
PLAIN_PC = MachineAccelerators(nvidia_gpu=False, apple_silicon=False, amd_gpu=False)
RADEON_VULKAN = MachineAccelerators(
    nvidia_gpu=False, apple_silicon=False, amd_gpu=True, vulkan_gpu=True
)
RADEON_ROCM = MachineAccelerators(
    nvidia_gpu=False, apple_silicon=False, amd_gpu=True, vulkan_gpu=True, hip_toolkit=True
)


def test_an_nvidia_machine_with_a_cpu_build_says_how_to_get_cuda() -> None:
    report = assess(NVIDIA_BOX, gpu_offload=False, system_info=CPU_BUILD, version=VERSION)
    assert (report.running, report.best) == (CPU, CUDA)
    assert report.reason == (
        "this machine has an NVIDIA GPU but llama-cpp-python was built without CUDA, so models "
        'run on the CPU; rebuild it with CMAKE_ARGS="-DGGML_CUDA=on" pip install '
        "--force-reinstall --no-cache-dir --no-deps llama-cpp-python==0.3.36"
    )


def test_the_best_backend_running_needs_no_explanation() -> None:
    cuda = assess(NVIDIA_BOX, gpu_offload=True, system_info=CUDA_BUILD, version=VERSION)
    assert (cuda.running, cuda.reason, cuda.gpu_backends_built) == (CUDA, None, (CUDA,))
    metal = assess(MAC, gpu_offload=True, system_info=METAL_BUILD, version=VERSION)
    assert (metal.running, metal.reason) == (METAL, None)
    assert metal.summary == (
        "Metal (llama.cpp) — built with Metal; this machine has Apple silicon (Metal)"
    )


def test_a_mac_with_a_build_without_metal_says_so() -> None:
    report = assess(MAC, gpu_offload=False, system_info=CPU_BUILD, version=VERSION)
    assert report.reason is not None
    assert "Apple silicon (Metal) but llama-cpp-python was built without Metal" in report.reason
    assert 'CMAKE_ARGS="-DGGML_METAL=on"' in report.reason


def test_a_machine_without_gpu_explains_the_cpu() -> None:
    report = assess(PLAIN_PC, gpu_offload=False, system_info=CPU_BUILD, version=VERSION)
    assert report.running == report.best == CPU
    assert report.reason is not None and report.reason.startswith("no supported GPU was found")
    assert report.summary == (
        "CPU (llama.cpp) — built with CPU only; this machine has no supported GPU"
    )


def test_the_installed_llama_cpp_is_probed_in_a_separate_process() -> None:
    report = probe_in_subprocess()
    assert report.system_info == llama_cpp.llama_print_system_info().decode().strip()
    assert report.best == detect_machine().best
    assert (report.running == CPU) == (not llama_cpp.llama_supports_gpu_offload())
    if report.running == CPU and report.best != CPU:
        assert report.reason is not None and "built without" in report.reason


def test_an_amd_gpu_runs_on_vulkan_without_the_rocm_toolkit_and_says_how_to_get_it() -> None:
    cpu = assess(RADEON_VULKAN, gpu_offload=False, system_info=CPU_BUILD, version=VERSION)
    assert (cpu.running, cpu.best) == (CPU, VULKAN)
    assert cpu.reason is not None and cpu.reason.endswith(
        'rebuild it with CMAKE_ARGS="-DGGML_VULKAN=on" pip install --force-reinstall '
        "--no-cache-dir --no-deps llama-cpp-python==0.3.36"
    )
    vulkan = assess(RADEON_VULKAN, gpu_offload=True, system_info=VULKAN_BUILD, version=VERSION)
    assert (vulkan.running, vulkan.reason) == (VULKAN, None)
    assert vulkan.summary == (
        "Vulkan (llama.cpp) — built with Vulkan; this machine has an AMD GPU (ROCm) and a "
        "Vulkan GPU"
    )


def test_with_the_rocm_toolkit_an_amd_gpu_is_pointed_at_rocm() -> None:
    vulkan = assess(RADEON_ROCM, gpu_offload=True, system_info=VULKAN_BUILD, version=VERSION)
    assert vulkan.best == ROCM
    assert vulkan.reason == (
        "this machine has an AMD GPU (ROCm) but llama-cpp-python was built without ROCm, so "
        'models run on Vulkan; rebuild it with CMAKE_ARGS="-DGGML_HIP=on" pip install '
        "--force-reinstall --no-cache-dir --no-deps llama-cpp-python==0.3.36"
    )
    rocm = assess(RADEON_ROCM, gpu_offload=True, system_info=ROCM_BUILD, version=VERSION)
    assert (rocm.running, rocm.reason) == (ROCM, None)


def test_a_vulkan_build_on_an_nvidia_machine_is_pointed_at_cuda() -> None:
    report = assess(NVIDIA_BOX, gpu_offload=True, system_info=VULKAN_BUILD, version=VERSION)
    assert report.running == VULKAN
    assert report.reason is not None
    assert "so models run on Vulkan" in report.reason and "-DGGML_CUDA=on" in report.reason


def test_only_gpus_in_the_vulkan_summary_count() -> None:
    summary = (
        "GPU0:\n\tdeviceType = PHYSICAL_DEVICE_TYPE_CPU\n\tdeviceName = llvmpipe (LLVM 15)\n"
        "GPU1:\n\tdeviceType = PHYSICAL_DEVICE_TYPE_DISCRETE_GPU\n"
        "\tdeviceName = AMD Radeon RX 7900 XTX (RADV NAVI31)\n"
    )
    assert gpus_in_vulkan_summary(summary) == ("AMD Radeon RX 7900 XTX (RADV NAVI31)",)


@pytest.mark.skipif(shutil.which("vulkaninfo") is None, reason="vulkaninfo is not installed here")
def test_the_real_vulkaninfo_is_read() -> None:
    listed = subprocess.run(
        ["vulkaninfo", "--summary"], capture_output=True, text=True, check=False
    ).stdout
    names = vulkan_gpus()
    assert names == gpus_in_vulkan_summary(listed)
    if "llvmpipe" in listed:  # Mesa's software device, as on the CI machine
        assert not any("llvmpipe" in name for name in names)
