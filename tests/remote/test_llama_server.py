"""``mtp-studio chat --endpoint`` against a real llama.cpp ``llama-server`` running the demo GGUF
with its MTP head (``--spec-type draft-mtp``): the answer streams and the acceptance comes from
llama-server's ``timings`` (``draft_n``, ``draft_n_accepted``); without speculative decoding the
chat says the server does not report acceptance.

``llama-server`` is built once per machine from the llama.cpp tree vendored in the pinned
llama-cpp-python source package (packaging/build_llama_server.sh, run by this test when the
cache lacks it; the first build takes several minutes, later runs reuse the cached binary).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from app.engine.remote.acceptance import LLAMA_SERVER
from app.engine.runtime.demo_model import demo_model_path

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BUILD_SECONDS = 3600
START_SECONDS = 120
DRAFT_DEPTH = 3


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


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _running_llama_server(binary: Path, *extra: str) -> Iterator[str]:
    port = _free_port()
    command = [str(binary), "-m", str(demo_model_path()), "--host", "127.0.0.1"]
    command += ["--port", str(port), "-c", "2048", "-t", "2", *extra]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            assert process.poll() is None, process.stderr.read().decode()[-4000:]
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


@pytest.fixture(scope="module")
def mtp_llama_server(llama_server_binary: Path) -> Iterator[str]:
    yield from _running_llama_server(
        llama_server_binary, "--spec-type", "draft-mtp", "--spec-draft-n-max", str(DRAFT_DEPTH)
    )


def chat(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", "chat", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_chat_streams_from_llama_server_and_shows_its_mtp_acceptance(
    mtp_llama_server: str,
) -> None:
    result = chat("--endpoint", mtp_llama_server, "--prompt", "Hello", "--max-tokens", "48")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
    stats = result.stderr.strip().splitlines()[-1]
    assert f"{LLAMA_SERVER})" in stats and "acceptance " in stats, stats


def test_llama_server_timings_give_drafted_and_accepted_counts(mtp_llama_server: str) -> None:
    result = chat(
        "--endpoint",
        mtp_llama_server,
        "--prompt",
        "Write a story.",
        "--max-tokens",
        "64",
        "--temp",
        "0",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    reply = json.loads(result.stdout)
    acceptance = reply["acceptance"]
    assert acceptance["source"] == LLAMA_SERVER
    assert acceptance["drafted"] > 0 and 0 <= acceptance["accepted"] <= acceptance["drafted"]
    assert reply["completion_tokens"] > 0 and reply["text"]


def test_without_speculative_decoding_the_chat_says_so(llama_server_binary: Path) -> None:
    for endpoint in _running_llama_server(llama_server_binary):
        result = chat("--endpoint", endpoint, "--prompt", "Hello", "--max-tokens", "8")
        assert result.returncode == 0, result.stderr
        assert result.stderr.strip().endswith("acceptance: the server does not report it")
