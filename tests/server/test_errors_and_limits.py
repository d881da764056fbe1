"""OpenAI-style errors (400 bad JSON or field, 404 unknown route, 401 wrong key), a full
queue answering 503 with Retry-After, and the refusal to bind a non-loopback host without a key —
against ``mtp-studio serve`` in another process, with the real ``openai`` client."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx2
import openai
import pytest
from openai import OpenAI

from tests.server.conftest import API_KEY
from tests.server.server_process import ServerProcess

pytestmark = pytest.mark.slow

MODEL = "demo-mtp"
PROMPT = [{"role": "user", "content": "Hello"}]
LONG_PROMPT = [{"role": "user", "content": "Write a long story about a dragon."}]


def client_for(server: ServerProcess, key: str = "unused") -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key=key, max_retries=0, timeout=120)


def test_bad_json_is_a_400_with_an_openai_error_body(server: ServerProcess) -> None:
    response = httpx2.post(
        f"{server.base_url}/chat/completions",
        content=b'{"model": "demo-mtp", "messages": [',
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and "not valid JSON" in error["message"]


def test_bad_field_is_a_400_naming_the_field(server: ServerProcess) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client_for(server).chat.completions.create(
            model=MODEL, messages=[{"role": "robot", "content": "hi"}]
        )
    assert caught.value.status_code == 400
    assert caught.value.body["param"] == "messages[0].role" and "robot" in caught.value.message
    with pytest.raises(openai.BadRequestError) as caught:
        client_for(server).chat.completions.create(model=MODEL, messages=PROMPT, temperature=-1)
    assert "temperature -1.0 is invalid" in caught.value.message


def test_unknown_route_is_a_404_error_body(server: ServerProcess) -> None:
    response = httpx2.get(f"{server.base_url}/embeddings")
    assert response.status_code == 404 and "error" in response.json()


def test_wrong_or_missing_key_is_a_401_and_the_right_key_works(keyed_server: ServerProcess) -> None:
    with pytest.raises(openai.AuthenticationError) as caught:
        client_for(keyed_server, "wrong-key").models.list()
    assert caught.value.status_code == 401 and caught.value.code == "invalid_api_key"
    missing = httpx2.post(f"{keyed_server.base_url}/chat/completions", json={"messages": PROMPT})
    assert missing.status_code == 401 and missing.json()["error"]["code"] == "invalid_api_key"
    assert [m.id for m in client_for(keyed_server, API_KEY).models.list().data] == [MODEL]
    assert httpx2.get(f"{keyed_server.root_url}/health").status_code == 200  # no key needed
    assert API_KEY not in "".join(keyed_server.lines), "the server logged its API key"


def test_full_queue_answers_503_with_retry_after(keyed_server: ServerProcess) -> None:
    client = client_for(keyed_server, API_KEY)
    health = f"{keyed_server.root_url}/health"
    running = client.chat.completions.create(
        model=MODEL, messages=LONG_PROMPT, max_tokens=4000, temperature=0, stream=True
    )
    next(iter(running))  # the first chunk: this one now runs
    with ThreadPoolExecutor(max_workers=1) as pool:
        # takes the queue's one place; its reply starts once the running one is done
        waiting = pool.submit(
            client.chat.completions.create, model=MODEL, messages=PROMPT, max_tokens=4
        )
        deadline = time.monotonic() + 10
        while httpx2.get(health).json()["queue_length"] != 1:
            assert time.monotonic() < deadline and not waiting.done(), "it never queued"
            time.sleep(0.05)
        assert httpx2.get(health).json()["generating"]
        try:
            with pytest.raises(openai.InternalServerError) as caught:
                client.chat.completions.create(model=MODEL, messages=PROMPT, max_tokens=4)
            assert caught.value.status_code == 503 and caught.value.code == "queue_full"
            assert int(caught.value.response.headers["retry-after"]) >= 1
        finally:
            running.close()
        # the closed stream frees the model for the waiting request
        assert waiting.result(timeout=30).usage.completion_tokens >= 1
    deadline = time.monotonic() + 15
    while httpx2.get(health).json()["generating"]:
        assert time.monotonic() < deadline, "the closed stream kept the model busy"
        time.sleep(0.1)
    # once the queue drains, requests are served again
    reply = client.chat.completions.create(model=MODEL, messages=PROMPT, max_tokens=4)
    assert reply.usage.completion_tokens >= 1


def test_non_loopback_host_without_a_key_is_refused_before_loading() -> None:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "app", "serve", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 2
    assert "--host 0.0.0.0" in result.stderr and "--api-key" in result.stderr
    assert time.monotonic() - started < 30


def test_a_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "app", "serve", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr and "--port" in result.stderr
