"""``serve`` without ``--model`` serves every model on disk, as a user with a small library sees it
through the ``openai`` and ``anthropic`` clients: ``/v1/models`` lists them (never a drafter or a
projector) with their MTP status, a request picks one by id or unique short name and it loads on
demand, a name the server does not have is each API's 404 naming what it has, requests for
different models run at once, a request waiting behind another one for the same model gets its
headers and keep-alives at once, a model copied in after the start is found, and
``POST /models/unload`` unloads an idle model (a 409 while it serves)."""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from collections.abc import Iterator

import anthropic
import httpx2
import openai
import pytest

from app.engine.runtime.core.demo_model import demo_model_path
from app.engine.server.core.model_directory import RESCAN_SECONDS
from tests.server.library import (
    ALL_IDS,
    CACHED_ID,
    DENSE_ID,
    TWIN_IDS,
    VISION_ID,
    Library,
    lay_out_library,
)
from tests.server.long_reply import LONG
from tests.server.server_process import ServerProcess, running_server

pytestmark = pytest.mark.slow

HELLO = [{"role": "user", "content": "Hello"}]
STORY = [{"role": "user", "content": "Write a long story about a dragon and a knight."}]


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return lay_out_library(tmp_path_factory.mktemp("library"))


@pytest.fixture(scope="module")
def library_server(library: Library) -> Iterator[ServerProcess]:
    args = library.serve_args("--alias", "claude-*=demo-mtp")
    with running_server(*args, home=library.home, env=library.env) as process:
        yield process


def client_for(server: ServerProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=120)


def card_of(server: ServerProcess, model_id: str) -> dict:
    return httpx2.get(f"{server.base_url}/models/{model_id}").json()


def test_models_lists_every_model_on_disk_with_its_mtp_status(
    library_server: ServerProcess,
) -> None:
    assert "library: 7 models, loaded on demand" in library_server.wait_for_line("listening on")
    cards = {card.id: card for card in client_for(library_server).models.list().data}
    assert set(cards) == ALL_IDS  # the drafter and the projector are no models of their own
    assert cards["demo-mtp"].model_extra["mtp"]["status"] == "head"
    assert cards["demo-mtp"].model_extra["mtp"]["layers"] == 1
    dense = cards[DENSE_ID].model_extra
    assert dense["mtp"]["status"] == "drafter" and "assistant" in dense["mtp"]["detail"]
    assert cards[CACHED_ID].owned_by == "acme" and cards[CACHED_ID].model_extra["format"] == "GGUF"
    assert {card.model_extra["state"] for card in cards.values()} <= {"not-loaded", "loaded"}
    one = card_of(library_server, CACHED_ID)  # an id with slashes, as a path
    assert one["id"] == CACHED_ID and one["quantization"] == "Q8_0"
    missing = httpx2.get(f"{library_server.base_url}/models/acme/Nothing.gguf")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"


def test_a_short_name_picks_its_model_which_loads_on_demand(
    library_server: ServerProcess,
) -> None:
    client = client_for(library_server)
    reply = client.chat.completions.create(
        model="Demo-GGUF:Q8_0", messages=HELLO, max_tokens=6, temperature=0
    )
    assert reply.model == CACHED_ID and reply.choices[0].message.content
    assert card_of(library_server, CACHED_ID)["state"] == "loaded"
    library_server.wait_for_line(rf"loaded {re.escape(CACHED_ID)} in \d+\.\d s")
    metrics = httpx2.get(f"{library_server.root_url}/metrics").text
    assert f'mtp_studio_model_loads_total{{model="{CACHED_ID}",outcome="loaded"}} 1.0' in metrics
    assert re.search(rf'mtp_studio_model_load_seconds_count{{model="{CACHED_ID}"}} 1\.0', metrics)
    same = client.chat.completions.create(model="acme/Demo-GGUF", messages=HELLO, max_tokens=2)
    assert same.model == CACHED_ID  # already loaded: no second load
    assert 'outcome="loaded"} 2.0' not in httpx2.get(f"{library_server.root_url}/metrics").text
    claude = anthropic.Anthropic(base_url=library_server.root_url, api_key="unused", max_retries=0)
    message = claude.messages.create(model="claude-opus-4", max_tokens=4, messages=HELLO)
    assert message.model == "demo-mtp"  # --alias claude-*=demo-mtp


def test_a_name_the_server_does_not_have_is_each_apis_404(library_server: ServerProcess) -> None:
    client = client_for(library_server)
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="gpt-4o", messages=HELLO, max_tokens=2, stream=True)
    assert caught.value.code == "model_not_found" and caught.value.param == "model"
    assert "'gpt-4o'" in caught.value.message and CACHED_ID in caught.value.message
    claude = anthropic.Anthropic(base_url=library_server.root_url, api_key="unused", max_retries=0)
    with pytest.raises(anthropic.NotFoundError) as missing:
        claude.messages.create(model="qwen-9000", max_tokens=2, messages=HELLO)
    assert missing.value.body["error"]["type"] == "not_found_error"
    assert "'qwen-9000'" in missing.value.body["error"]["message"]
    with pytest.raises(openai.BadRequestError) as twins:
        client.chat.completions.create(model="twin", messages=HELLO, max_tokens=2)
    assert all(twin in twins.value.message for twin in TWIN_IDS)  # ambiguous: names both
    nameless = httpx2.post(
        f"{library_server.base_url}/chat/completions", json={"messages": HELLO, "max_tokens": 2}
    )
    assert nameless.status_code == 400 and "'model' is required" in nameless.text


def test_requests_for_different_models_run_at_once(library_server: ServerProcess) -> None:
    client = client_for(library_server)
    long_reply = client.chat.completions.create(
        model="demo-mtp",
        messages=STORY,
        max_tokens=3000,
        temperature=0,
        stream=True,
        response_format=LONG,
    )
    chunks = iter(long_reply)
    next(chunks)  # it runs
    try:
        short = client.chat.completions.create(
            model=VISION_ID, messages=HELLO, max_tokens=4, temperature=0
        )
        assert short.model == VISION_ID and short.choices[0].message.content
        status = httpx2.get(f"{library_server.base_url}/status").json()
        running = [c for c in status["clients"] if c["state"] == "running"]
        assert [c["model"] for c in running] == ["demo-mtp"], "the long reply still streams"
        assert running[0]["stream"] and running[0]["endpoint"] == "chat_completions"
    finally:
        long_reply.close()


def test_a_request_waiting_for_its_model_gets_headers_and_keep_alives_at_once(
    library_server: ServerProcess,
) -> None:
    client = client_for(library_server)
    first = client.chat.completions.create(
        model="demo-mtp",
        messages=STORY,
        max_tokens=3000,
        temperature=0,
        stream=True,
        response_format=LONG,
    )
    next(iter(first))
    seen: dict[str, object] = {}
    body = {"model": "demo-mtp", "messages": HELLO, "max_tokens": 3, "stream": True}

    def second() -> None:
        sent = time.monotonic()
        with httpx2.stream("POST", f"{library_server.base_url}/chat/completions", json=body) as r:
            seen["headers"] = time.monotonic() - sent
            seen["status"] = r.status_code
            seen["lines"] = list(r.iter_lines())

    caller = threading.Thread(target=second)
    try:
        caller.start()
        deadline = time.monotonic() + 20
        while "headers" not in seen:
            assert time.monotonic() < deadline, "no headers while it waited"
            time.sleep(0.05)
        status = httpx2.get(f"{library_server.base_url}/status").json()
        assert [c["state"] for c in status["clients"]] == ["running", "waiting"]
    finally:
        first.close()
    caller.join(timeout=60)
    assert seen["status"] == 200 and seen["headers"] < 3.0
    lines = [line for line in seen["lines"] if line]
    assert lines[0] == ": waiting for demo-mtp: next in line"  # an SSE comment clients skip
    assert lines[-1] == "data: [DONE]"
    whole = {"model": "demo-mtp", "messages": HELLO, "max_tokens": 3}
    blocker = client.chat.completions.create(
        model="demo-mtp",
        messages=STORY,
        max_tokens=3000,
        temperature=0,
        stream=True,
        response_format=LONG,
    )
    next(iter(blocker))
    try:
        sent = time.monotonic()
        with httpx2.stream("POST", f"{library_server.base_url}/chat/completions", json=whole) as r:
            headers_after = time.monotonic() - sent
            blocker.close()
            text = r.read().decode()
    finally:
        blocker.close()
    assert r.status_code == 200 and headers_after < 3.0
    assert text.startswith(" ")  # a whole reply's keep-alive: JSON allows leading spaces
    assert json.loads(text)["choices"][0]["message"]["content"]


def test_a_model_copied_in_after_the_start_is_served(
    library_server: ServerProcess, library: Library
) -> None:
    late = library.models_dir / "late" / "late-arrival.gguf"
    late.parent.mkdir()
    shutil.copy2(demo_model_path(), late)
    # an unknown name rescans the folders at most every RESCAN_SECONDS: the first test of a
    # fresh server (this one alone, or first on its xdist worker) would ask within them
    time.sleep(RESCAN_SECONDS)
    reply = client_for(library_server).chat.completions.create(
        model="late-arrival", messages=HELLO, max_tokens=2
    )
    assert reply.model == "late/late-arrival.gguf"


def test_unload_frees_an_idle_model_and_refuses_a_busy_one(library_server: ServerProcess) -> None:
    client = client_for(library_server)
    client.chat.completions.create(model=VISION_ID, messages=HELLO, max_tokens=2)
    unload = f"{library_server.root_url}/models/unload"
    answer = httpx2.post(unload, json={"model": VISION_ID}).json()
    assert answer == {
        "object": "model.unload",
        "model": VISION_ID,
        "unloaded": True,
        "state": "not-loaded",
    }
    assert card_of(library_server, VISION_ID)["state"] == "not-loaded"
    library_server.wait_for_line(rf"unloaded {re.escape(VISION_ID)} \(admin\)")
    busy = client.chat.completions.create(
        model="demo-mtp", messages=STORY, max_tokens=3000, stream=True, response_format=LONG
    )
    next(iter(busy))
    try:
        refused = httpx2.post(unload, json={"model": "demo-mtp"})
    finally:
        busy.close()
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "model_busy"
