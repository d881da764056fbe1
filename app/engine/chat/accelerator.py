"""Which accelerator the llama.cpp backend uses here, and why it is not a better one.

"GPU not detected, no explanation" is a top complaint about desktop LLM apps. The answer has two
halves: what the machine has (an NVIDIA GPU with its driver, Apple silicon, an AMD GPU) and what
the installed llama-cpp-python was built with (``llama_supports_gpu_offload`` and the backends
listed by ``llama_print_system_info``). When the machine has something better than what runs,
the report says why and how to fix it — usually a rebuild with the right ``CMAKE_ARGS``.

:func:`probe_accelerator` imports llama.cpp's native library; the window calls
:func:`probe_in_subprocess` from a background thread so the GUI never loads it or waits for it.
"""

from __future__ import annotations

import multiprocessing
import os
import platform
import shutil
from dataclasses import dataclass

CPU = "CPU"
CUDA = "CUDA"
METAL = "Metal"
ROCM = "ROCm"
VULKAN = "Vulkan"
REBUILD = 'CMAKE_ARGS="{flag}" pip install --force-reinstall --no-cache-dir llama-cpp-python'
_BUILD_FLAGS = {CUDA: "-DGGML_CUDA=on", METAL: "-DGGML_METAL=on", ROCM: "-DGGML_HIP=on"}
_SYSTEM_INFO_NAMES = {CUDA: "CUDA", METAL: "METAL", ROCM: "ROCM", VULKAN: "VULKAN"}


@dataclass(frozen=True)
class MachineAccelerators:
    """What the machine has, independent of any build."""

    nvidia_gpu: bool
    apple_silicon: bool
    amd_gpu: bool

    @property
    def best(self) -> str:
        if self.apple_silicon:
            return METAL
        if self.nvidia_gpu:
            return CUDA
        if self.amd_gpu:
            return ROCM
        return CPU


@dataclass(frozen=True)
class AcceleratorReport:
    """``running``: what llama.cpp uses; ``best``: the best the machine offers; ``reason``: why
    models run on the CPU, with the fix when there is one (None when a GPU is used)."""

    running: str
    best: str
    gpu_backends_built: tuple[str, ...]
    system_info: str
    reason: str | None

    @property
    def summary(self) -> str:
        return f"{self.running} (llama.cpp)"


def detect_machine() -> MachineAccelerators:
    system = platform.system()
    return MachineAccelerators(
        nvidia_gpu=system != "Darwin"
        and (
            os.path.exists("/proc/driver/nvidia/version") or shutil.which("nvidia-smi") is not None
        ),
        apple_silicon=system == "Darwin" and platform.machine() == "arm64",
        amd_gpu=system == "Linux" and os.path.exists("/dev/kfd"),
    )


def assess(machine: MachineAccelerators, gpu_offload: bool, system_info: str) -> AcceleratorReport:
    """Compare what the build offers with what the machine has."""
    upper = system_info.upper()
    built = tuple(
        name for name, tag in _SYSTEM_INFO_NAMES.items() if f"{tag} " in upper or f"{tag}:" in upper
    )
    running = CPU
    if gpu_offload:
        running = next((name for name in (METAL, CUDA, ROCM, VULKAN) if name in built), "GPU")
    best = machine.best
    reason = None
    if best != CPU and running == CPU:
        reason = (
            f"this machine has {_describe(best)} but llama-cpp-python was built without "
            f"{best}, so models run on the CPU; rebuild it with "
            f"{REBUILD.format(flag=_BUILD_FLAGS[best])}"
        )
    elif best == CPU and running == CPU:
        reason = (
            "no supported GPU was found (no NVIDIA driver, not Apple silicon, no AMD ROCm "
            "device), so models run on the CPU"
        )
    return AcceleratorReport(running, best, built, system_info.strip(), reason)


def _describe(accelerator: str) -> str:
    return {
        CUDA: "an NVIDIA GPU",
        METAL: "Apple silicon (Metal)",
        ROCM: "an AMD GPU (ROCm)",
    }.get(accelerator, accelerator)


def probe_accelerator() -> AcceleratorReport:
    """Ask the installed llama.cpp what it was built with (loads the native library)."""
    import llama_cpp

    info = llama_cpp.llama_print_system_info()
    text = info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)
    return assess(detect_machine(), bool(llama_cpp.llama_supports_gpu_offload()), text)


def probe_in_subprocess(timeout_seconds: float = 120.0) -> AcceleratorReport:
    """:func:`probe_accelerator` in a short-lived spawned process (the caller never loads
    llama.cpp's native library); blocks, so call it off the GUI thread."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        return pool.apply_async(probe_accelerator).get(timeout_seconds)
