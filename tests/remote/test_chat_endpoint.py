"""``mtp-studio chat --endpoint`` against another MTP Studio (``serve`` in its own process):
streamed answers, the conversation kept across turns, a stop that cancels the remote generation,
the acceptance read from the server's ``mtp`` statistics, and clear errors for a wrong key or URL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from app.engine.errors import RemoteError
from app.engine.remote.acceptance import MTP_STUDIO
from app.engine.remote.client import RemoteEndpoint
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.sampling.sampler import SamplerSettings
from tests.server.server_process import ServerProcess, running_server

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
KEY = "remote-test-key"


@pytest.fixture(scope="module")
def remote() -> Iterator[ServerProcess]:
    with running_server("--api-key", KEY, "--mtp-depth", "2") as process:
        yield process


def chat(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", "chat", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_one_prompt_streams_and_shows_the_servers_acceptance(remote: ServerProcess) -> None:
    result = chat(
        "--endpoint", remote.base_url, "--api-key", KEY, "--prompt", "Hello", "--max-tokens", "24"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip(), "no answer was printed"
    assert "demo-mtp at http://127.0.0.1" in result.stderr
    stats = result.stderr.strip().splitlines()[-1]
    assert "tokens (" in stats and "tok/s" in stats
    assert f"{MTP_STUDIO})" in stats and "by depth" in stats, stats
    assert KEY not in result.stderr + result.stdout


def test_interactive_chat_keeps_the_history_and_reset_forgets_it(remote: ServerProcess) -> None:
    turns = "Hi\nTell me more\n/reset\nTell me more\n/exit\n"
    result = chat(
        "--endpoint",
        remote.base_url,
        "--api-key",
        KEY,
        "--json",
        "--max-tokens",
        "8",
        "--temp",
        "0",
        stdin=turns,
    )
    assert result.returncode == 0, result.stderr
    replies = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(replies) == 3
    first, second, after_reset = (reply["prompt_tokens"] for reply in replies)
    assert second > first + 8, "the second turn did not carry the first one"
    assert after_reset < second
    assert all(reply["acceptance"]["source"] == MTP_STUDIO for reply in replies)
    assert len(replies[0]["acceptance"]["drafted_by_depth"]) == 2


def test_stopping_a_reply_cancels_the_remote_generation(remote: ServerProcess) -> None:
    with RemoteEndpoint(remote.base_url, api_key=KEY) as endpoint:
        stream = endpoint.chat(
            [ChatMessage("user", "Write a long story about a dragon.")],
            SamplerSettings(temperature=0.0),
            max_tokens=4000,
        )
        pieces = []
        for piece in stream:
            pieces.append(piece)
            if len(pieces) == 3:
                stream.cancel()  # what Ctrl-C does in the chat command
        reply = stream.wait()
    assert reply.finish_reason == "cancelled"
    assert reply.text == "".join(pieces) and len(pieces) < 20
    remote.wait_for_line(r"POST /v1/chat/completions 499 .*client disconnected")
    deadline = time.monotonic() + 10
    while "generation_running 1.0" in _metrics(remote):
        assert time.monotonic() < deadline, "the remote generation went on after the stop"
        time.sleep(0.1)


def _metrics(server: ServerProcess) -> str:
    return httpx2.get(f"{server.root_url}/metrics", headers={"Authorization": f"Bearer {KEY}"}).text


def test_wrong_key_and_wrong_url_are_clear_errors(remote: ServerProcess) -> None:
    result = chat("--endpoint", remote.base_url, "--api-key", "nope", "--prompt", "Hi")
    assert result.returncode == 2
    assert "answered 401" in result.stderr and "--api-key" in result.stderr
    assert "nope" not in result.stderr
    with pytest.raises(RemoteError, match="not an http"):
        RemoteEndpoint("localhost:8080/v1")
    result = chat("--endpoint", "http://127.0.0.1:9/v1", "--prompt", "Hi")
    assert result.returncode == 2 and "cannot reach http://127.0.0.1:9/v1/models" in result.stderr
