"""``mtp-studio chat --endpoint`` against a real llama.cpp ``llama-server`` running the demo GGUF
with its MTP head (``--spec-type draft-mtp``): the answer streams and the acceptance comes from
llama-server's ``timings`` (``draft_n``, ``draft_n_accepted``); without speculative decoding the
chat says the server does not report acceptance.

``llama-server`` is built once per machine (tests/llama_server.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine.remote.acceptance import LLAMA_SERVER
from tests.llama_server import ROOT, running_llama_server
from tests.server.server_process import ServerProcess

pytestmark = pytest.mark.slow


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
    mtp_llama_server: ServerProcess,
) -> None:
    result = chat(
        "--endpoint", mtp_llama_server.base_url, "--prompt", "Hello", "--max-tokens", "48"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
    stats = result.stderr.strip().splitlines()[-1]
    assert f"{LLAMA_SERVER})" in stats and "acceptance " in stats, stats


def test_llama_server_timings_give_drafted_and_accepted_counts(
    mtp_llama_server: ServerProcess,
) -> None:
    result = chat(
        "--endpoint",
        mtp_llama_server.base_url,
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
    with running_llama_server(llama_server_binary) as server:
        result = chat("--endpoint", server.base_url, "--prompt", "Hello", "--max-tokens", "8")
        assert result.returncode == 0, result.stderr
        assert result.stderr.strip().endswith("acceptance: the server does not report it")
