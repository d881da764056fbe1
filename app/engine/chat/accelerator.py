"""Which accelerator the llama.cpp backend uses here, and why it is not a better one.

"GPU not detected, no explanation" is a top complaint about desktop LLM apps. The answer has two
halves: what the machine has (an NVIDIA GPU with its driver, Apple silicon, an AMD GPU, a GPU
``vulkaninfo`` lists) and what the installed llama-cpp-python was built with
(``llama_supports_gpu_offload`` and the backends listed by ``llama_print_system_info``). When
the machine has something better than what runs, the report says why and gives the one command
that fixes it: a rebuild with the ``CMAKE_ARGS`` of the build ``packaging/setup.sh`` would pick
here (Metal, CUDA, ROCm or Vulkan).

:func:`probe_accelerator` imports llama.cpp's native library; the window calls
:func:`probe_in_subprocess` from a background thread so the GUI never loads it or waits for it.
"""

from __future__ import annotations

import multiprocessing
import os
import platform
import shutil
import subprocess
from dataclasses import dataclass

CPU = "CPU"
CUDA = "CUDA"
METAL = "Metal"
ROCM = "ROCm"
VULKAN = "Vulkan"
REBUILD = (
    'CMAKE_ARGS="{flag}" pip install --force-reinstall --no-cache-dir --no-deps '
    "llama-cpp-python=={version}"
)
_BUILD_FLAGS = {
    CUDA: "-DGGML_CUDA=on",
    METAL: "-DGGML_METAL=on",
    ROCM: "-DGGML_HIP=on",
    VULKAN: "-DGGML_VULKAN=on",
}
_SYSTEM_INFO_NAMES = {CUDA: "CUDA", METAL: "METAL", ROCM: "ROCM", VULKAN: "VULKAN"}
_GPU_DEVICE_TYPES = ("DISCRETE_GPU", "INTEGRATED_GPU", "VIRTUAL_GPU")
_VULKANINFO_SECONDS = 10.0


@dataclass(frozen=True)
class MachineAccelerators:
    """What the machine has, independent of any build."""

    nvidia_gpu: bool
    apple_silicon: bool
    amd_gpu: bool
    """An AMD GPU with the ROCm kernel driver (/dev/kfd)."""
    vulkan_gpu: bool = False
    """vulkaninfo lists a GPU (a software device such as Mesa's lavapipe is not one)."""
    hip_toolkit: bool = False
    """hipconfig is on PATH: a ROCm build can be made here."""

    @property
    def best(self) -> str:
        """The build packaging/setup.sh makes here (with its toolkit installed)."""
        if self.apple_silicon:
            return METAL
        if self.nvidia_gpu:
            return CUDA
        if self.amd_gpu and self.hip_toolkit:
            return ROCM
        if self.vulkan_gpu:
            return VULKAN
        if self.amd_gpu:
            return ROCM
        return CPU

    @property
    def description(self) -> str:
        found = [
            text
            for present, text in (
                (self.apple_silicon, "Apple silicon (Metal)"),
                (self.nvidia_gpu, "an NVIDIA GPU (CUDA)"),
                (self.amd_gpu, "an AMD GPU (ROCm)"),
                (self.vulkan_gpu, "a Vulkan GPU"),
            )
            if present
        ]
        return " and ".join(found) if found else "no supported GPU"


@dataclass(frozen=True)
class AcceleratorReport:
    """``running``: what llama.cpp uses; ``best``: the best the machine offers; ``reason``: why
    models do not run on the best, with the one command that fixes it when there is one (None
    when the best runs)."""

    running: str
    best: str
    gpu_backends_built: tuple[str, ...]
    system_info: str
    reason: str | None
    machine: str = "no supported GPU"

    @property
    def built(self) -> str:
        return ", ".join(self.gpu_backends_built) or "CPU only"

    @property
    def summary(self) -> str:
        """The backend line: what runs, what the build has, what the machine has."""
        return (
            f"{self.running} (llama.cpp) — built with {self.built}; this machine has {self.machine}"
        )


def detect_machine() -> MachineAccelerators:
    system = platform.system()
    return MachineAccelerators(
        nvidia_gpu=system != "Darwin"
        and (
            os.path.exists("/proc/driver/nvidia/version") or shutil.which("nvidia-smi") is not None
        ),
        apple_silicon=system == "Darwin" and platform.machine() == "arm64",
        amd_gpu=system == "Linux" and os.path.exists("/dev/kfd"),
        vulkan_gpu=system != "Darwin" and bool(vulkan_gpus()),
        hip_toolkit=shutil.which("hipconfig") is not None,
    )


def vulkan_gpus() -> tuple[str, ...]:
    """The GPU names ``vulkaninfo --summary`` lists (runs it: call off the GUI thread)."""
    if shutil.which("vulkaninfo") is None:
        return ()
    try:
        summary = subprocess.run(
            ["vulkaninfo", "--summary"],
            capture_output=True,
            text=True,
            timeout=_VULKANINFO_SECONDS,
            check=False,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return gpus_in_vulkan_summary(summary)


def gpus_in_vulkan_summary(summary: str) -> tuple[str, ...]:
    names = []
    device_type = ""
    for line in summary.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "deviceType":
            device_type = value.strip()
        elif key.strip() == "deviceName":
            if device_type.endswith(_GPU_DEVICE_TYPES):
                names.append(value.strip())
            device_type = ""
    return tuple(names)


def assess(
    machine: MachineAccelerators, gpu_offload: bool, system_info: str, version: str
) -> AcceleratorReport:
    """Compare what the build (llama-cpp-python ``version``) offers with what the machine has."""
    upper = system_info.upper()
    built = tuple(
        name for name, tag in _SYSTEM_INFO_NAMES.items() if f"{tag} " in upper or f"{tag}:" in upper
    )
    running = CPU
    if gpu_offload:
        running = next((name for name in (METAL, CUDA, ROCM, VULKAN) if name in built), "GPU")
    best = machine.best
    reason = None
    if best != CPU and running != best:
        where = "the CPU" if running == CPU else running
        reason = (
            f"this machine has {_describe(best)} but llama-cpp-python was built without "
            f"{best}, so models run on {where}; rebuild it with "
            f"{REBUILD.format(flag=_BUILD_FLAGS[best], version=version)}"
        )
    elif best == CPU and running == CPU:
        reason = (
            "no supported GPU was found (no NVIDIA driver, not Apple silicon, no AMD ROCm "
            "device, no Vulkan GPU), so models run on the CPU"
        )
    return AcceleratorReport(
        running, best, built, system_info.strip(), reason, machine=machine.description
    )


def _describe(accelerator: str) -> str:
    return {
        CUDA: "an NVIDIA GPU",
        METAL: "Apple silicon (Metal)",
        ROCM: "an AMD GPU (ROCm)",
        VULKAN: "a Vulkan GPU",
    }[accelerator]


def probe_accelerator() -> AcceleratorReport:
    """Ask the installed llama.cpp what it was built with (loads the native library)."""
    import llama_cpp

    from app.engine.runtime.backends.llama_cpp.cpu_backends import load_installed

    load_installed()
    info = llama_cpp.llama_print_system_info()
    text = info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)
    gpu_offload = bool(llama_cpp.llama_supports_gpu_offload())
    return assess(detect_machine(), gpu_offload, text, llama_cpp.__version__)


def probe_in_subprocess(timeout_seconds: float = 120.0) -> AcceleratorReport:
    """:func:`probe_accelerator` in a short-lived spawned process (the caller never loads
    llama.cpp's native library); blocks, so call it off the GUI thread."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        return pool.apply_async(probe_accelerator).get(timeout_seconds)
