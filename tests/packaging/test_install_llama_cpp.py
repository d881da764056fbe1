"""``packaging/install_llama_cpp.sh`` (run by ``setup.sh``): the planned llama-cpp-python, built
once per flags (and CPU, for native code), proven by a 4-token run, and replaced by another build
when that run dies by a signal — the fix for issue 31's first reply dying by SIGILL on a VM.

The builds are :mod:`tests.packaging.llama_fakes`'s source package (seconds, not minutes, and
a CPU that faults on demand); pip, the wheel cache, the virtualenv, the smoke run on the demo
model and the llama.cpp it loads are real. The machine's PATH holds only the tools the scripts
use, so a GPU here does not change the plan.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.engine.runtime.backends.llama_cpp.cpu_backends import installed_folder, runnable_variants
from tests.packaging.llama_fakes import fake_sdist, wheelhouse
from tests.workers import PORTABLE_BUILD

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "packaging" / "install_llama_cpp.sh"
PORTABLE = (
    "-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON "
    "-DCMAKE_INSTALL_BINDIR=llama_cpp/lib -DCMAKE_INSTALL_RPATH=$ORIGIN"
)
TOOLS = (
    *("bash", "sed", "sha256sum", "cut", "grep", "head", "tr", "sort", "ls", "mkdir", "mktemp"),
    *("mv", "rm", "nproc", "env", "dirname", "uname", "cat"),
)
NATIVE_DIED = (
    "setup: the native llama.cpp build died by SIGILL in a 4-token test: it holds an "
    "instruction this CPU does not run (built on a CPU with more extensions, or one this VM "
    "advertises and faults on); installing the portable build instead, its CPU variant picked "
    "at load"
)
pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Machine:
    """A fresh virtualenv, a wheel cache, pip's cache and an index holding one llama-cpp-python."""

    folder: Path
    python: Path
    wheels: Path
    env: dict[str, str]

    def run(self, *command: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(command),
            cwd=ROOT,
            env={**self.env, **extra},
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )

    def install(self, *options: str) -> subprocess.CompletedProcess[str]:
        return self.run("bash", str(SCRIPT), str(self.python), *options)

    def installed_lib(self) -> Path:
        found = self.run(
            str(self.python),
            "-c",
            "import importlib.util, pathlib; "
            "print(pathlib.Path(importlib.util.find_spec('llama_cpp').origin).parent)",
        )
        assert found.returncode == 0, found.stderr
        return Path(found.stdout.strip())

    def cached_wheels(self) -> list[Path]:
        return sorted(self.wheels.glob("*/llama_cpp_python-*.whl"))


@pytest.fixture(scope="module")
def house(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return wheelhouse(tmp_path_factory.mktemp("wheelhouse"))


def machine(tmp_path: Path, house: Path, sdist: Path) -> Machine:
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in TOOLS:
        found = shutil.which(name)
        assert found is not None, f"{name} is needed by the set-up scripts"
        (tools / name).symlink_to(found)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    keep = {
        k: v for k, v in os.environ.items() if k not in ("CMAKE_ARGS", "MTP_STUDIO_CPU_VARIANT")
    }
    env = {
        **keep,
        "PATH": str(tools),
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": f"{house} {sdist.parent}",
        "PIP_CACHE_DIR": str(tmp_path / "pip-cache"),
        "MTP_STUDIO_WHEEL_CACHE": str(tmp_path / "wheels"),
    }
    return Machine(tmp_path, venv / "bin" / "python", tmp_path / "wheels", env)


def built_with(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        return archive.read("llama_cpp/built_with.txt").decode()


def test_each_plan_builds_its_own_wheel_where_pip_s_cache_would_reuse_the_first(
    tmp_path: Path, house: Path
) -> None:
    sdist = fake_sdist(tmp_path / "index", installed_folder().parent)
    box = machine(tmp_path, house, sdist)
    both = box.run(
        "bash",
        "-c",
        'source packaging/build_plan.sh && ensure_wheel "$1" "$2" && ensure_wheel "$1" "$3"',
        "-",
        str(box.python),
        "-DGGML_CUDA=on",
        "-DGGML_VULKAN=on",
    )
    assert both.returncode == 0, both.stderr
    cuda, vulkan = (Path(line) for line in both.stdout.split())
    assert cuda.parent != vulkan.parent
    assert (built_with(cuda), built_with(vulkan)) == ("-DGGML_CUDA=on", "-DGGML_VULKAN=on")
    # What set-up did before: pip's own wheel cache hands the first build to the second plan.
    for flags in ("-DGGML_CUDA=on", "-DGGML_VULKAN=on"):
        box.run(
            str(box.python),
            *("-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(tmp_path / flags)),
            "llama-cpp-python==0.3.36",
            CMAKE_ARGS=flags,
        )
    stale = next((tmp_path / "-DGGML_VULKAN=on").glob("*.whl"))
    assert built_with(stale) == "-DGGML_CUDA=on"


def test_a_native_build_that_dies_by_sigill_is_replaced_by_the_portable_one(
    tmp_path: Path, house: Path
) -> None:
    sdist = fake_sdist(tmp_path / "index", installed_folder().parent, native_faults=True)
    box = machine(tmp_path, house, sdist)
    done = box.install()
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("setup: llama.cpp build CPU with native CPU code — no GPU found")
    assert lines[1] == NATIVE_DIED
    assert lines[2].startswith("smoke: 4 tokens from demo-mtp.gguf with llama.cpp's")
    assert (box.installed_lib() / "built_with.txt").read_text() == PORTABLE
    native, portable = sorted(box.cached_wheels(), key=built_with)
    assert (built_with(native), built_with(portable)) == ("", PORTABLE)
    assert native.parent.name == _native_key("") and portable.parent.name == _key(PORTABLE)
    # The next set-up reuses both cached wheels: no build, the same answer.
    again = box.install()
    assert again.returncode == 0 and "building llama-cpp-python" not in again.stderr
    assert again.stdout.splitlines()[1] == NATIVE_DIED


def test_a_build_that_fails_without_a_signal_stops_set_up(tmp_path: Path, house: Path) -> None:
    sdist = fake_sdist(tmp_path / "index", installed_folder().parent)
    box = machine(tmp_path, house, sdist)
    # A GPU build that cannot reach a GPU is no GPU build: here, a "CUDA" wheel without CUDA.
    for name, body in (("nvidia-smi", 'echo "GPU 0: NVIDIA H100 (UUID: GPU-1)"'), ("nvcc", "")):
        (box.folder / "bin" / name).write_text(f"#!/bin/sh\n{body}\n")
        (box.folder / "bin" / name).chmod(0o755)
    done = box.install()
    assert done.returncode == 1
    assert "smoke: this llama.cpp build" in done.stderr and "has no GPU backend" in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "setup: the llama.cpp build just installed fails its 4-token test (exit status 3, see "
        "above)"
    )


@pytest.mark.xdist_group(PORTABLE_BUILD)
def test_a_portable_variant_that_dies_is_removed_and_the_next_one_down_runs(
    tmp_path: Path, house: Path, portable_llama_cpp: Path
) -> None:
    ranked = [variant.name for variant in runnable_variants(portable_llama_cpp / "lib")]
    best, next_down = ranked[0], ranked[1]
    sdist = fake_sdist(
        tmp_path / "index", portable_llama_cpp, native_faults=True, faulty_variant=best
    )
    box = machine(tmp_path, house, sdist)
    done = box.install()
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[1] == NATIVE_DIED
    assert lines[-1] == (
        f"setup: llama.cpp's {best} CPU variant(s) died by SIGILL here although this CPU claims "
        "their instruction sets (as AMX in some VMs); removed them from this install, so "
        f"llama.cpp uses {next_down}"
    )
    lib = box.installed_lib() / "lib"
    assert not (lib / f"libggml-cpu-{best}.so").exists()
    assert all((lib / f"libggml-cpu-{name}.so").exists() for name in ranked[1:])
    # The install now runs as it is, with no variant forced.
    smoke = box.run(str(box.python), "packaging/smoke_llama.py")
    assert smoke.returncode == 0, smoke.stderr
    assert smoke.stdout.strip() == (
        f"smoke: 4 tokens from demo-mtp.gguf with llama.cpp's CPU variant {next_down}"
    )


def _key(identity: str) -> str:
    return hashlib.sha256(identity.encode()).hexdigest()[:12]


def _native_key(flags: str) -> str:
    """The wheel folder of a native build on this machine (its CPU's instruction sets)."""
    features = subprocess.run(
        ["bash", "-c", "source packaging/build_plan.sh && cpu_features"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return _key(f"{flags or 'cpu'}\ncpu: {features}")
