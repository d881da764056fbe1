"""llama.cpp's own ``llama-server`` for the tests that compare with it or connect to it.

It is built once per machine from the llama.cpp tree vendored in the pinned llama-cpp-python
source package (``packaging/build_llama_server.sh``, which returns the cached binary when it is
there; the first build takes several minutes). The session fixture builds it on first use, so
no test that needs it is skipped on a fresh machine. :func:`running_llama_server` runs it on the
demo GGUF on a free loopback port until the generator is closed.
"""

from __future__ import annotations

import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from app.engine.runtime.core.demo_model import demo_model_path

ROOT = Path(__file__).resolve().parents[1]
BUILD_SECONDS = 3600
START_SECONDS = 120


@pytest.fixture(scope="session")
def llama_server_binary() -> Path:
    build = subprocess.run(
        ["bash", str(ROOT / "packaging" / "build_llama_server.sh")],
        capture_output=True,
        text=True,
        timeout=BUILD_SECONDS,
    )
    assert build.returncode == 0, f"building llama-server failed:\n{build.stderr[-4000:]}"
    return Path(build.stdout.strip().splitlines()[-1])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def running_llama_server(binary: Path, *extra: str) -> Iterator[str]:
    """Yield the ``/v1`` URL of llama-server on the demo GGUF (with ``extra`` arguments)."""
    port = free_port()
    command = [str(binary), "-m", str(demo_model_path()), "--host", "127.0.0.1"]
    command += ["--port", str(port), "-c", "2048", "-t", "2", *extra]
    with tempfile.TemporaryFile() as log:  # a file: an unread pipe would fill and stall it
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + START_SECONDS
            while True:
                if process.poll() is not None:
                    log.seek(0)
                    raise AssertionError(log.read().decode(errors="replace")[-4000:])
                assert time.monotonic() < deadline, "llama-server did not become ready"
                try:
                    if httpx2.get(f"{url}/health", timeout=2).status_code == 200:
                        break
                except httpx2.HTTPError:
                    pass
                time.sleep(0.2)
            yield f"{url}/v1"
        finally:
            process.terminate()
            process.wait(timeout=30)
