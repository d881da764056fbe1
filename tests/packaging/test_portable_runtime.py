"""The app on the portable llama.cpp (``setup.sh --portable``, the bundle): it runs on the best CPU
variant this CPU runs or the one ``MTP_STUDIO_CPU_VARIANT`` forces, says which, and a worker that
dies by SIGILL names the variant and the next one down (issue 31).

The portable build is the real one (``portable_llama_cpp``), put first on PYTHONPATH for the CLI.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runtime.illegal_instruction import SIGILL, inference_worker_of, no_core_files
from tests.workers import PORTABLE_BUILD

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "resources" / "models" / "demo-mtp.gguf"
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(PORTABLE_BUILD)]


def _env(portable_llama_cpp: Path, variant: str = "") -> dict[str, str]:
    site = portable_llama_cpp.parent
    return {
        **os.environ,
        "PYTHONPATH": f"{site}{os.pathsep}{ROOT}",
        "MTP_STUDIO_CPU_VARIANT": variant,
    }


def _ranked(portable_llama_cpp: Path) -> list[str]:
    listed = subprocess.run(
        [sys.executable, str(ROOT / "packaging" / "smoke_llama.py"), "--list-variants"],
        env=_env(portable_llama_cpp),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return listed.stdout.split()


def test_chat_runs_on_the_best_variant_or_the_forced_one(portable_llama_cpp: Path) -> None:
    ranked = _ranked(portable_llama_cpp)
    command = [sys.executable, "-m", "app", "chat", "--model", str(DEMO), "--prompt", "Hi"]
    for variant, forced in ((ranked[0], ""), (ranked[-1], ranked[-1])):
        chat = subprocess.run(
            [*command, "--max-tokens", "8", "--temp", "0"],
            env=_env(portable_llama_cpp, forced),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert chat.returncode == 0, chat.stderr
        assert f"llama.cpp CPU variant {variant}" in chat.stderr


def test_a_variant_that_dies_by_sigill_is_named_with_the_next_one_down(
    portable_llama_cpp: Path, tmp_path: Path
) -> None:
    ranked = _ranked(portable_llama_cpp)
    command = [sys.executable, "-m", "app", "bench", "decode", "--model", str(DEMO)]
    with no_core_files():
        bench = subprocess.Popen(
            [*command, "--depths", "1", "--repeats", "1", "--max-tokens", "32"],
            env=_env(portable_llama_cpp),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.kill(inference_worker_of(bench.pid), SIGILL)
        _out, err = bench.communicate(timeout=300)
    assert bench.returncode == 2, err
    advice = (
        f"llama.cpp's CPU variant for this CPU, {ranked[0]} (in {portable_llama_cpp / 'lib'}), "
        "uses an instruction this CPU claims but does not run (AVX-512 or AMX in some VMs); "
        f"start MTP Studio with MTP_STUDIO_CPU_VARIANT={ranked[1]} to use the next one down"
    )
    assert err.strip().splitlines()[-1].endswith(advice)
