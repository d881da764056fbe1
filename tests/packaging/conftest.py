"""The portable llama-cpp-python the packaging tests share with the bundle."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def portable_llama_cpp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The portable build's ``llama_cpp`` package (every CPU variant), unpacked. Its wheel is
    built once per machine into the wheel cache — long, see docs/install.md — and is the one
    ``packaging/build.sh`` puts in the bundle."""
    built = subprocess.run(
        [
            "bash",
            "-c",
            f'source packaging/build_plan.sh && ensure_wheel "{sys.executable}" "$PORTABLE_FLAGS"',
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=3 * 3600,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-4000:]
    wheel = built.stdout.strip().splitlines()[-1]
    target = tmp_path_factory.mktemp("portable-llama-cpp")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(target),
            wheel,
        ],
        check=True,
        timeout=600,
    )
    return target / "llama_cpp"
