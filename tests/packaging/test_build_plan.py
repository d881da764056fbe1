"""``packaging/setup.sh --print-build-flags``: the llama.cpp build a machine gets, and why.

Each test fakes a machine by putting scripts named like the real tools (nvidia-smi, nvcc,
hipconfig, vulkaninfo, glslc, uname) on an otherwise bare PATH and its CPU by a cpuinfo file
(``MTP_STUDIO_CPUINFO``), runs the real setup script and reads the plan it prints — the same text
a user sees.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What setup.sh and build_plan.sh call besides the tools that tell the machine apart.
UTILITIES = (
    *("bash", "sed", "sha256sum", "cut", "grep", "awk", "head", "dirname", "uname", "cat"),
    *("tr", "sort"),
)
NVIDIA_SMI = 'echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0b1c)"'
RADEON = """cat <<'END'
Devices:
GPU0:
	deviceType         = PHYSICAL_DEVICE_TYPE_DISCRETE_GPU
	deviceName         = AMD Radeon RX 9070 XT (RADV GFX1201)
END"""
LAVAPIPE = """cat <<'END'
Devices:
GPU0:
	deviceType         = PHYSICAL_DEVICE_TYPE_CPU
	deviceName         = llvmpipe (LLVM 15.0.6, 256 bits)
END"""


# Fake CPUs, as /proc/cpuinfo shows them (the first processor's lines are read).
HASWELL_FLAGS = (
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse "
    "sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology cpuid pni "
    "pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand "
    "hypervisor lahf_lm abm invpcid_single pti fsgsbase bmi1 avx2 smep bmi2 erms invpcid xsaveopt"
)
HASWELL_ISA = (
    "abm aes avx avx2 bmi1 bmi2 cx16 f16c fma movbe pclmulqdq pni popcnt sse sse2 sse4_1 sse4_2 "
    "ssse3"
)
SAPPHIRE_RAPIDS_EXTRA = (
    "avx512f avx512dq adx avx512ifma avx512cd sha_ni avx512bw avx512vl avx512vbmi avx512_vbmi2 "
    "gfni vaes vpclmulqdq avx512_vnni avx512_bitalg avx512_vpopcntdq avx_vnni avx512_bf16 "
    "avx512_fp16 amx_bf16 amx_tile amx_int8"
)
SAPPHIRE_RAPIDS_FLAGS = f"{HASWELL_FLAGS} {SAPPHIRE_RAPIDS_EXTRA}"
SAPPHIRE_RAPIDS_ISA = " ".join(sorted(f"{HASWELL_ISA} {SAPPHIRE_RAPIDS_EXTRA}".split()))
GRAVITON_FEATURES = "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp asimddp sve"


def cpuinfo(flags: str, model: str = "Intel(R) Xeon(R) CPU", label: str = "flags") -> str:
    """Two processors' worth of /proc/cpuinfo with ``flags`` on its ``label`` line."""
    one = f"processor\t: 0\nmodel name\t: {model}\n{label}\t\t: {flags}\nbugs\t\t: spectre_v1\n\n"
    return one + one.replace("processor\t: 0", "processor\t: 1")


def plan(
    tmp_path: Path,
    tools: dict[str, str],
    *options: str,
    cpu: str = cpuinfo(HASWELL_FLAGS),
    **environment: str,
) -> str:
    """The printed plan on a machine whose PATH holds ``tools`` (name → shell body) and whose
    /proc/cpuinfo reads ``cpu``; each call gets a machine of its own."""
    machine = Path(tempfile.mkdtemp(dir=tmp_path))
    path = machine / "bin"
    path.mkdir()
    for name in UTILITIES:
        if name not in tools:
            found = shutil.which(name)
            assert found is not None, f"{name} is needed to run setup.sh"
            (path / name).symlink_to(found)
    for name, body in tools.items():
        script = path / name
        script.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
        script.chmod(0o755)
    (machine / "cpuinfo").write_text(cpu, encoding="utf-8")
    cache = machine / "wheels"
    env = {
        "PATH": str(path),
        "HOME": str(machine),
        "MTP_STUDIO_WHEEL_CACHE": str(cache),
        "MTP_STUDIO_CPUINFO": str(machine / "cpuinfo"),
    }
    done = subprocess.run(
        [str(path / "bash"), str(ROOT / "packaging" / "setup.sh"), "--print-build-flags", *options],
        env={**env, **environment},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert not cache.exists(), "--print-build-flags must change nothing"
    return done.stdout.replace(str(cache), "CACHE")


def key(flags: str, isa: str | None = HASWELL_ISA) -> str:
    """The wheel folder's name: the flags, and for native CPU code the CPU's instruction sets."""
    identity = flags or "cpu"
    if isa is not None:
        identity += f"\ncpu: {isa}"
    return hashlib.sha256(identity.encode()).hexdigest()[:12]


def cache_line(printed: str) -> str:
    return next(line for line in printed.splitlines() if line.startswith("wheel: "))


def test_a_machine_without_gpu_gets_the_native_cpu_build_keyed_by_its_cpu(tmp_path: Path) -> None:
    printed = plan(tmp_path, {})
    assert printed.splitlines() == [
        "build: CPU",
        "why: no GPU found (nvidia-smi lists none, no hipconfig, vulkaninfo shows no GPU, "
        "not Apple silicon)",
        f"CPU code: native, for this CPU's instruction sets ({HASWELL_ISA}); a 4-token test "
        "after install switches to the portable build if it dies",
        "CMAKE_ARGS: (none, the CPU defaults of llama.cpp)",
        f"wheel: llama-cpp-python 0.3.36, cached in CACHE/{key('')}",
    ]


def test_a_wheel_built_on_another_cpu_is_not_reused(tmp_path: Path) -> None:
    haswell = cache_line(plan(tmp_path, {}))
    sapphire_rapids = cache_line(plan(tmp_path, {}, cpu=cpuinfo(SAPPHIRE_RAPIDS_FLAGS)))
    assert haswell != sapphire_rapids
    assert sapphire_rapids.endswith(key("", SAPPHIRE_RAPIDS_ISA))
    # The same instruction sets under another name, in another order, with other non-ISA
    # flags: the same CPU for the compiler, the same wheel.
    shuffled = " ".join(reversed(HASWELL_FLAGS.split())).replace("hypervisor", "tsc_known_freq")
    assert cache_line(plan(tmp_path, {}, cpu=cpuinfo(shuffled, model="another name"))) == haswell


def test_an_arm_cpu_is_keyed_by_its_features(tmp_path: Path) -> None:
    graviton = cpuinfo(GRAVITON_FEATURES, label="Features")
    printed = plan(tmp_path, {}, cpu=graviton)
    isa = " ".join(sorted(GRAVITON_FEATURES.split()))
    assert f"CPU code: native, for this CPU's instruction sets ({isa});" in printed
    assert cache_line(printed).endswith(key("", isa))


def test_portable_cpu_code_is_one_wheel_for_every_cpu(tmp_path: Path) -> None:
    printed = plan(tmp_path, {}, "--portable")
    assert (
        "CPU code: portable, one module per CPU micro-architecture, the best one this CPU runs "
        "picked at load\n" in printed
    )
    assert f"CMAKE_ARGS: {PORTABLE}\n" in printed
    assert cache_line(printed).endswith(key(PORTABLE, isa=None))
    other_cpu = plan(tmp_path, {}, "--portable", cpu=cpuinfo(SAPPHIRE_RAPIDS_FLAGS))
    assert cache_line(other_cpu) == cache_line(printed)


PORTABLE = (
    "-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON "
    "-DCMAKE_INSTALL_BINDIR=llama_cpp/lib -DCMAKE_INSTALL_RPATH=$ORIGIN"
)


def test_an_nvidia_gpu_with_the_cuda_toolkit_gets_cuda(tmp_path: Path) -> None:
    printed = plan(tmp_path, {"nvidia-smi": NVIDIA_SMI, "nvcc": "echo 12.4"})
    assert "build: CUDA\n" in printed
    assert "why: nvidia-smi lists GPU 0: NVIDIA H100 80GB HBM3 and nvcc" in printed
    assert "CMAKE_ARGS: -DGGML_CUDA=on\n" in printed
    # Its CPU code is native too: the CPU is part of the key.
    assert f"CACHE/{key('-DGGML_CUDA=on')}" in printed


def test_a_portable_cuda_build_keeps_the_gpu(tmp_path: Path) -> None:
    printed = plan(tmp_path, {"nvidia-smi": NVIDIA_SMI, "nvcc": "echo 12.4"}, "--portable")
    assert "build: CUDA\n" in printed
    assert f"CMAKE_ARGS: -DGGML_CUDA=on {PORTABLE}\n" in printed
    assert f"CACHE/{key(f'-DGGML_CUDA=on {PORTABLE}', isa=None)}" in printed


def vulkan_sdk(folder: Path, header_version: int) -> str:
    """A Vulkan SDK folder whose headers are of ``header_version`` (1.3.N)."""
    headers = folder / "include" / "vulkan"
    headers.mkdir(parents=True)
    (headers / "vulkan_core.h").write_text(f"#define VK_HEADER_VERSION {header_version}\n")
    return str(folder)


def test_a_vulkan_gpu_with_glslc_gets_vulkan(tmp_path: Path) -> None:
    sdk = vulkan_sdk(tmp_path / "sdk", 309)
    printed = plan(tmp_path, {"vulkaninfo": RADEON, "glslc": "true"}, VULKAN_SDK=sdk)
    assert "build: Vulkan\n" in printed
    assert "AMD Radeon RX 9070 XT (RADV GFX1201)" in printed
    assert "CMAKE_ARGS: -DGGML_VULKAN=on\n" in printed
    assert f"CACHE/{key('-DGGML_VULKAN=on')}" in printed


def test_vulkan_headers_too_old_for_llama_cpp_say_so(tmp_path: Path) -> None:
    sdk = vulkan_sdk(tmp_path / "sdk", 239)  # Debian 12's libvulkan-dev
    lines = plan(tmp_path, {"vulkaninfo": RADEON, "glslc": "true"}, VULKAN_SDK=sdk).splitlines()
    assert lines[0].startswith(
        "setup: a Vulkan GPU was found (AMD Radeon RX 9070 XT (RADV GFX1201)) but not the Vulkan "
        f"SDK (Vulkan headers 1.3.272 or newer (found 1.3.239 in {sdk}/include; Debian 12's are "
        "too old: use the LunarG Vulkan SDK and set VULKAN_SDK)); install it"
    )
    assert lines[1] == "build: CPU"


def test_a_software_vulkan_device_is_not_a_gpu(tmp_path: Path) -> None:
    printed = plan(tmp_path, {"vulkaninfo": LAVAPIPE, "glslc": "true"})
    assert printed.startswith("build: CPU\n")


def test_a_vulkaninfo_that_fails_finds_no_gpu(tmp_path: Path) -> None:
    failing = "echo 'ERROR: [Loader Message] vkCreateInstance failed' >&2; exit 1"
    printed = plan(tmp_path, {"vulkaninfo": failing, "glslc": "true"})
    assert printed.startswith("build: CPU\n")


def test_the_rocm_toolkit_gets_rocm_with_its_compiler(tmp_path: Path) -> None:
    hipconfig = 'case "$1" in -l) echo /opt/rocm/llvm/bin ;; -R) echo /opt/rocm ;; esac'
    printed = plan(tmp_path, {"hipconfig": hipconfig})
    assert "build: ROCm\n" in printed
    assert "CMAKE_ARGS: -DGGML_HIP=on\n" in printed
    assert "environment: HIPCXX=/opt/rocm/llvm/bin/clang HIP_PATH=/opt/rocm\n" in printed


def test_apple_silicon_gets_metal(tmp_path: Path) -> None:
    uname = 'case "$1" in -s) echo Darwin ;; -m) echo arm64 ;; esac'
    printed = plan(tmp_path, {"uname": uname})
    assert "build: Metal\n" in printed and "CMAKE_ARGS: -DGGML_METAL=on\n" in printed


@pytest.mark.parametrize(
    ("tools", "hint"),
    [
        (
            {"nvidia-smi": NVIDIA_SMI},
            "setup: an NVIDIA GPU was found (GPU 0: NVIDIA H100 80GB HBM3) but not the CUDA "
            "toolkit (nvcc); install it (apt: nvidia-cuda-toolkit · dnf: cuda-toolkit · "
            "winget: Nvidia.CUDA) and run setup again to use the GPU",
        ),
        (
            {"vulkaninfo": RADEON},
            "setup: a Vulkan GPU was found (AMD Radeon RX 9070 XT (RADV GFX1201)) but not the "
            "Vulkan SDK (glslc); install it (apt: glslc libvulkan-dev spirv-headers · dnf: glslc "
            "vulkan-loader-devel spirv-headers-devel · winget: KhronosGroup.VulkanSDK) and run "
            "setup again to use the GPU",
        ),
    ],
)
def test_a_gpu_without_its_toolkit_says_what_to_install_and_builds_for_the_cpu(
    tmp_path: Path, tools: dict[str, str], hint: str
) -> None:
    lines = plan(tmp_path, tools).splitlines()
    assert lines[0] == hint
    assert lines[1] == "build: CPU"
    assert lines[2] == "why: a GPU was found but not its toolkit (see above)"


def test_cmake_args_override_what_was_found(tmp_path: Path) -> None:
    flags = "-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=89"
    printed = plan(tmp_path, {"vulkaninfo": RADEON, "glslc": "true"}, CMAKE_ARGS=flags)
    assert "build: custom\n" in printed
    assert f"CMAKE_ARGS: {flags}\n" in printed
    assert f"CACHE/{key(flags)}" in printed


def test_cmake_args_without_native_code_are_keyed_by_their_flags_alone(tmp_path: Path) -> None:
    flags = "-DGGML_NATIVE=OFF -DGGML_AVX2=ON"
    printed = plan(tmp_path, {}, CMAKE_ARGS=flags)
    assert "CPU code: the instruction sets CMAKE_ARGS name (GGML_NATIVE=OFF)\n" in printed
    assert cache_line(printed).endswith(key(flags, isa=None))


def test_an_unknown_option_is_refused_with_the_known_one(tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", str(ROOT / "packaging" / "setup.sh"), "--print-flags"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**os.environ, "MTP_STUDIO_WHEEL_CACHE": str(tmp_path / "wheels")},
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "setup: unknown option --print-flags; use no option, --portable or --print-build-flags"
    )
    assert not (tmp_path / "wheels").exists()
