"""The device scripts parse, and bench/device_check.sh --dry-run names every step of a GPU run.

The real runs need an NVIDIA GPU (device_check.sh) or an hour of Vulkan shader builds
(vulkan_lavapipe.sh), so CI checks what can be checked without them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = (
    "packaging/setup.sh",
    "packaging/build_plan.sh",
    "packaging/install_llama_cpp.sh",
    "packaging/build_llama_server.sh",
    "packaging/build.sh",
    "bench/vulkan_lavapipe.sh",
    "bench/device_check.sh",
)


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_script_parses(script: str) -> None:
    done = subprocess.run(["bash", "-n", str(ROOT / script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_device_check_dry_run_names_every_step(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHON": sys.executable, "MTP_STUDIO_WHEEL_CACHE": str(tmp_path)}
    done = subprocess.run(
        ["bash", str(ROOT / "bench" / "device_check.sh"), "--dry-run"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    planned = done.stdout
    assert "CMAKE_ARGS=-DGGML_CUDA=on" in planned
    assert "pip wheel --no-deps --no-cache-dir" in planned  # pip's cache ignores CMAKE_ARGS
    # pytest started with llama.cpp loaded first (a CUDA build's first load crashes after numpy)
    assert "import\\ llama_cpp\\,\\ sys\\,\\ pytest" in planned
    assert "-q -p no:cacheprovider tests/runtime/test_exactness.py" in planned
    decode = "-m app bench decode --repeats 2 --max-tokens 128"
    assert f"{decode} --json" in planned
    assert f"{decode} --wide 24 --json" in planned and f"{decode} --wide 96 --json" in planned
    assert "-m app bench chat --turns 6" in planned
    assert not any(tmp_path.iterdir()), "a dry run builds nothing"
