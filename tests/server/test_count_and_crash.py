"""``count_tokens`` answers without the worker — while a long reply is being generated, with the
count the reply's prefill uses — and a worker that dies under a request is the server's fault: a
503 with a retry hint on both APIs, after which the next request gets a fresh worker."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx2
import openai
import pytest
from anthropic import Anthropic
from openai import OpenAI

from tests.server.server_process import ServerProcess, running_server

pytestmark = pytest.mark.slow

LONG_STORY = {
    "type": "object",
    "properties": {"story": {"type": "string", "minLength": 20_000}},
    "required": ["story"],
}
"""Holds the tiny demo model to a reply of thousands of tokens (seconds of generation)."""
TOOL = {"name": "read_file", "input_schema": {"type": "object"}}
CONVERSATION = [
    {"role": "user", "content": "Read the file. " * 400},
    {"role": "assistant", "content": "Done."},
    {"role": "user", "content": "Summarise it."},
]


@pytest.fixture(scope="module")
def own_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server of this module's own: its worker gets killed."""
    with running_server(home=tmp_path_factory.mktemp("crash-serve-home")) as process:
        yield process


def _long_reply(
    server: ServerProcess, outcome: list[object], api: str = "openai"
) -> threading.Thread:
    """A long reply asked for in a thread; its reply or error lands in ``outcome``."""
    story = [{"role": "user", "content": "Tell me a long story."}]

    def run() -> None:
        try:
            if api == "openai":
                client = OpenAI(base_url=server.base_url, api_key="u", max_retries=0, timeout=300)
                schema = {"name": "story", "schema": LONG_STORY}
                outcome.append(
                    client.chat.completions.create(
                        model="demo-mtp",
                        messages=story,
                        response_format={"type": "json_schema", "json_schema": schema},
                        max_tokens=20_000,
                    )
                )
            else:
                client = Anthropic(base_url=server.root_url, api_key="u", max_retries=0)
                output = {"format": {"type": "json_schema", "schema": LONG_STORY}}
                outcome.append(
                    client.messages.create(
                        model="demo-mtp", max_tokens=20_000, messages=story, output_config=output
                    )
                )
        except (openai.APIError, anthropic.APIError) as error:
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _wait_until_generating(server: ServerProcess) -> None:
    deadline = time.monotonic() + 60
    while not httpx2.get(f"{server.root_url}/health").json()["generating"]:
        assert time.monotonic() < deadline, "the long reply never started"
        time.sleep(0.05)


def worker_pid(server_pid: int) -> int:
    """The inference worker: the server's ``spawn``-ed child."""
    for task in Path(f"/proc/{server_pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                return int(child)
    raise AssertionError(f"serve (pid {server_pid}) has no inference worker process")


def test_count_tokens_answers_while_a_long_reply_is_generating(own_server: ServerProcess) -> None:
    client = Anthropic(base_url=own_server.root_url, api_key="unused", max_retries=0)
    outcome: list[object] = []
    generating = _long_reply(own_server, outcome)
    _wait_until_generating(own_server)
    counted = client.messages.count_tokens(model="demo-mtp", messages=CONVERSATION, tools=[TOOL])
    assert generating.is_alive() and not outcome, "the count waited for the reply"
    assert httpx2.get(f"{own_server.root_url}/health").json()["generating"]
    generating.join(timeout=300)
    reply = client.messages.create(
        model="demo-mtp", max_tokens=1, messages=CONVERSATION, tools=[TOOL]
    )
    used = reply.usage.input_tokens + reply.usage.cache_read_input_tokens
    assert counted.input_tokens == used > 800


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_worker_that_dies_under_a_request_is_a_503_with_retry_after(
    own_server: ServerProcess, api: str
) -> None:
    outcome: list[object] = []
    generating = _long_reply(own_server, outcome, api)
    _wait_until_generating(own_server)
    os.kill(worker_pid(own_server.process.pid), signal.SIGKILL)
    generating.join(timeout=60)
    [error] = outcome
    assert isinstance(error, openai.APIStatusError | anthropic.APIStatusError), error
    assert error.status_code == 503 and error.response.headers["retry-after"].isdigit()
    body = error.body["error"] if api == "anthropic" else error.body  # openai unwraps "error"
    assert "worker stopped unexpectedly" in body["message"] and "retry" in body["message"]
    assert body["type"] == ("overloaded_error" if api == "anthropic" else "server_error")
    client = Anthropic(base_url=own_server.root_url, api_key="unused", max_retries=0)
    reply = client.messages.create(model="demo-mtp", max_tokens=4, messages=CONVERSATION[:1])
    assert reply.usage.output_tokens >= 1  # the next request got a fresh worker
