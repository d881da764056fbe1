"""A worker killed by SIGILL stops ``serve`` with the advice, instead of a server whose every
request would start a worker that dies the same way (issue 31)."""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.runtime.illegal_instruction import (
    SIGILL,
    expected_advice,
    inference_worker_of,
    no_core_files,
)
from tests.server.server_process import ServerProcess, running_server

DEMO = Path(__file__).resolve().parents[2] / "resources" / "models" / "demo-mtp.gguf"


@pytest.mark.slow
def test_serve_stops_with_the_advice_when_its_worker_dies_by_sigill(tmp_path: Path) -> None:
    with no_core_files(), running_server("--model", str(DEMO), home=tmp_path) as server:
        worker = inference_worker_of(server.process.pid)
        answer: dict[str, object] = {}
        asking = threading.Thread(target=_ask_long_reply, args=(server, answer), daemon=True)
        asking.start()
        _wait_until_generating(server)
        os.kill(worker, SIGILL)
        asking.join(timeout=60)
        status = server.process.wait(timeout=60)
    assert status == 2
    assert answer["status"] == 503 and "killed by SIGILL" in str(answer["body"])
    said = "\n".join(server.lines)
    assert "mtp-studio: error: the llama.cpp worker was killed by SIGILL" in said
    assert expected_advice() in said


def _ask_long_reply(server: ServerProcess, answer: dict[str, object]) -> None:
    body = {
        "model": "demo-mtp",
        "messages": [{"role": "user", "content": "Count to a thousand."}],
        "max_tokens": 4000,
    }
    request = urllib.request.Request(
        f"{server.base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            answer["status"], answer["body"] = reply.status, reply.read().decode()
    except urllib.error.HTTPError as failed:
        answer["status"], answer["body"] = failed.code, failed.read().decode()


def _wait_until_generating(server: ServerProcess, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{server.root_url}/health", timeout=5) as reply:
            if json.loads(reply.read())["generating"]:
                return
        time.sleep(0.02)
    raise AssertionError("the server never started generating")
