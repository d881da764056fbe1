"""``packaging/build_llama_server.sh``, the comparison peer: a cached build that dies by SIGILL
in its 4-token run is passed over for the portable build, and remembered as dead (issue 31).

The cache is laid out as the script leaves it, with two stand-ins: the native build is a
``llama-server`` that kills itself by SIGILL (what ``-march=native`` code from a richer CPU
does), the portable one is the real llama-server this machine built. The script's choice, its
smoke run on the demo model and what it remembers are real.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "packaging" / "build_llama_server.sh"


def _run(cache: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *options],
        env={**os.environ, "MTP_STUDIO_LLAMA_SERVER_CACHE": str(cache)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _folders(cache: Path) -> dict[str, Path]:
    printed = _run(cache, "--print-build-flags")
    assert printed.returncode == 0, printed.stderr
    return {
        line.split(":", 1)[0]: Path(line.rsplit(" in ", 1)[1])
        for line in printed.stdout.splitlines()
    }


@pytest.mark.slow
def test_a_native_llama_server_that_dies_by_sigill_gives_way_to_the_portable_one(
    tmp_path: Path, llama_server_binary: Path
) -> None:
    cache = tmp_path / "cache"
    folders = _folders(cache)
    assert folders["native"] != folders["portable"]
    native = folders["native"] / "bin" / "llama-server"
    native.parent.mkdir(parents=True)
    native.write_text("#!/bin/sh\nkill -ILL $$\n")
    native.chmod(0o755)
    portable = folders["portable"] / "bin" / "llama-server"
    portable.parent.mkdir(parents=True)
    portable.symlink_to(llama_server_binary)

    first = _run(cache)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == str(portable)
    assert "smoke: llama-server died by SIGILL" in first.stderr
    assert (
        "build_llama_server: the llama-server built with -DBUILD_SHARED_LIBS=OFF died by SIGILL "
        "in a 4-token test" in first.stderr
    )
    assert f"smoke: 4 tokens from demo-mtp.gguf with {portable}" in first.stderr
    assert (folders["native"] / "DIED").read_text().strip() == "SIGILL"
    # Remembered: the next call neither runs the dead build again nor builds anything.
    again = _run(cache)
    assert again.returncode == 0 and again.stdout.strip() == str(portable)
    assert again.stderr == ""
