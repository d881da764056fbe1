"""llama.cpp's own ``llama-server`` for the tests that compare with it or connect to it.

It is built once per machine from the llama.cpp tree vendored in the pinned llama-cpp-python
source package (``packaging/build_llama_server.sh``, which returns the cached binary when it is
there; the first build takes several minutes). The session fixture builds it on first use, so
no test that needs it is skipped on a fresh machine. :func:`running_llama_server` runs it on the
demo GGUF on a free loopback port (through the tests' one server launcher) until the ``with``
block ends; :func:`mtp_llama_server` is one such server drafting with the demo's MTP head,
shared by the session.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from filelock import FileLock

from app.engine.runtime.core.demo_model import demo_model_path
from tests.ports import free_port
from tests.server.server_process import ServerProcess, launch

ROOT = Path(__file__).resolve().parents[1]
BUILD_SECONDS = 3600
CACHE = Path(
    os.environ.get("MTP_STUDIO_LLAMA_SERVER_CACHE")
    or Path.home() / ".cache" / "mtp-studio" / "llama-server"
)
"""Where packaging/build_llama_server.sh keeps its builds (the same variable and default)."""
MTP_DRAFT_DEPTH = 3


@pytest.fixture(scope="session")
def llama_server_binary() -> Path:
    """The cached binary; built first when missing, by one test process at a time (a second one,
    an xdist worker or another checkout's suite, waits for that build and reuses it)."""
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(CACHE.parent / f"{CACHE.name}.build.lock"):
        build = subprocess.run(
            ["bash", str(ROOT / "packaging" / "build_llama_server.sh")],
            capture_output=True,
            text=True,
            timeout=BUILD_SECONDS,
        )
    assert build.returncode == 0, f"building llama-server failed:\n{build.stderr[-4000:]}"
    return Path(build.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def mtp_llama_server(llama_server_binary: Path) -> Iterator[ServerProcess]:
    """llama-server drafting with the demo's MTP head (``--spec-type draft-mtp``)."""
    with running_llama_server(
        llama_server_binary, "--spec-type", "draft-mtp", "--spec-draft-n-max", str(MTP_DRAFT_DEPTH)
    ) as server:
        yield server


@contextlib.contextmanager
def running_llama_server(binary: Path, *extra: str) -> Iterator[ServerProcess]:
    """llama-server on the demo GGUF (with ``extra`` arguments); its ``base_url`` ends in /v1."""
    port = free_port()
    root_url = f"http://127.0.0.1:{port}"
    command = [str(binary), "-m", str(demo_model_path()), "--host", "127.0.0.1"]
    command += ["--port", str(port), "-c", "2048", "-t", "1", *extra]

    def healthy(_server: ServerProcess) -> str | None:
        try:
            if httpx2.get(f"{root_url}/health", timeout=2).status_code == 200:
                return f"{root_url}/v1"
        except httpx2.HTTPError:
            pass
        return None

    with launch(command, healthy) as server:
        yield server
