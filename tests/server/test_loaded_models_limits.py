"""What stays loaded: with ``--max-loaded 1`` a request for a second model unloads the first
(least recently used) to make room, and ``--idle-unload`` unloads a model nobody used for that
long — both in the log, ``/metrics`` and ``/v1/status``, and ``mtp-studio ps`` shows it; the
unload endpoint needs the server's key."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import httpx2
import openai
import pytest

from tests.server.conftest import API_KEY
from tests.server.library import CACHED_ID, VISION_ID, Library, lay_out_library
from tests.server.server_process import ServerProcess, running_server

pytestmark = pytest.mark.slow

HELLO = [{"role": "user", "content": "Hello"}]
IDLE_SECONDS = 3


@pytest.fixture(scope="module")
def one_at_a_time(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    library: Library = lay_out_library(tmp_path_factory.mktemp("one-loaded"))
    args = library.serve_args("--max-loaded", "1", "--idle-unload", f"{IDLE_SECONDS}s")
    with running_server(*args, home=library.home, env=library.env) as process:
        yield process


def ask(server: ServerProcess, model: str) -> str:
    client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=120)
    return client.chat.completions.create(model=model, messages=HELLO, max_tokens=2).model


def loaded(server: ServerProcess) -> list[str]:
    return [model["id"] for model in httpx2.get(f"{server.base_url}/status").json()["loaded"]]


def ps(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "app", "ps", "--url", server.base_url, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def test_a_second_model_unloads_the_first_and_idle_ones_go(one_at_a_time: ServerProcess) -> None:
    assert "at most 1 loaded, unloaded after 3 s idle" in one_at_a_time.lines[0]
    assert ask(one_at_a_time, "demo-mtp") == "demo-mtp"
    assert loaded(one_at_a_time) == ["demo-mtp"]
    shown = ps(one_at_a_time)
    assert shown.returncode == 0 and re.search(r"demo-mtp\s+loaded\s+0/1\s+0", shown.stdout)
    assert ask(one_at_a_time, VISION_ID) == VISION_ID
    assert loaded(one_at_a_time) == [VISION_ID]
    one_at_a_time.wait_for_line(rf"unloaded demo-mtp \(to make room for {re.escape(VISION_ID)}\)")
    status = json.loads(ps(one_at_a_time, "--json").stdout)
    assert status["limits"]["max_loaded"] == 1 and status["loaded"][0]["id"] == VISION_ID
    assert status["loaded"][0]["memory"]["resident_bytes"] > 0
    deadline = time.monotonic() + IDLE_SECONDS + 10
    while loaded(one_at_a_time):
        assert time.monotonic() < deadline, "the idle model stayed loaded"
        time.sleep(0.2)
    one_at_a_time.wait_for_line(rf"unloaded {re.escape(VISION_ID)} \(idle for \d+ s\)")
    metrics = httpx2.get(f"{one_at_a_time.root_url}/metrics").text
    assert 'mtp_studio_model_unloads_total{model="demo-mtp",reason="evicted"} 1.0' in metrics
    assert f'mtp_studio_model_unloads_total{{model="{VISION_ID}",reason="idle"}} 1.0' in metrics
    assert "mtp_studio_models_loaded 0.0" in metrics
    assert ask(one_at_a_time, CACHED_ID) == CACHED_ID  # and loads again when asked


def test_unloading_needs_the_key_and_the_pinned_model_comes_back(
    keyed_server: ServerProcess,
) -> None:
    unload = f"{keyed_server.root_url}/models/unload"
    assert httpx2.post(unload, json={"model": "demo-mtp"}).status_code == 401
    keyed = {"authorization": f"Bearer {API_KEY}"}
    answer = httpx2.post(unload, json={"model": "demo-mtp"}, headers=keyed).json()
    assert answer["unloaded"] is True
    client = openai.OpenAI(base_url=keyed_server.base_url, api_key=API_KEY, max_retries=0)
    reply = client.chat.completions.create(model="demo-mtp", messages=HELLO, max_tokens=2)
    assert reply.choices[0].message.content  # loaded again on demand
    keyed_server.wait_for_line(r"loaded demo-mtp in")
    refused = ps(keyed_server)
    assert refused.returncode == 2 and "API key" in refused.stderr


def test_ps_without_a_server_says_so() -> None:
    command = [sys.executable, "-m", "app", "ps", "--url", "http://127.0.0.1:9"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "no server answers at http://127.0.0.1:9" in result.stderr


def test_two_models_that_do_not_fit_together_take_turns(one_at_a_time: ServerProcess) -> None:
    """Two clients, one per model, each sending requests back to back: neither starves (each
    model is handed back after a request when the other waits), and both finish."""
    done: dict[str, int] = {}

    def client(model: str) -> None:
        for _ in range(3):
            ask(one_at_a_time, model)
        done[model] = 3

    threads = [threading.Thread(target=client, args=(m,)) for m in ("demo-mtp", VISION_ID)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)
    assert done == {"demo-mtp": 3, VISION_ID: 3}
    evictions = [line for line in one_at_a_time.lines if "to make room for" in line]
    assert len(evictions) >= 2  # they alternated rather than one running all its requests
