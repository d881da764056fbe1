"""What OpenAI clients (Continue, LangChain, Open WebUI …) rely on, checked with the real ``openai``
client: any number of stop strings, the pinned model answering its own names and its aliases
and no other (a 404 ``model_not_found`` naming what it serves), usage sent once
and only when asked, replies without ``max_tokens`` running to the context, errors known before
the reply as HTTP 4xx even for streams, the ``developer`` role, clear 400s for what the runtime
cannot honour (``n`` > 1, ``logprobs``), ``seed: -1``, the routes without ``/v1`` and
the ``--cors`` option."""

from __future__ import annotations

import httpx2
import openai
import pytest
from openai import OpenAI

from tests.server.conftest import CORS_ORIGIN
from tests.server.server_process import ServerProcess

pytestmark = pytest.mark.slow

SERVED = "demo-mtp"
HELLO = [{"role": "user", "content": "Hello, who are you?"}]
STORY = [{"role": "user", "content": "Write a long story about a dragon."}]


def client_for(server: ServerProcess, base_url: str | None = None) -> OpenAI:
    return OpenAI(
        base_url=base_url or server.base_url, api_key="unused", max_retries=0, timeout=120
    )


def test_six_stop_strings_are_accepted_and_the_earliest_cuts(server: ServerProcess) -> None:
    client = client_for(server)
    full = (
        client.chat.completions.create(model=SERVED, messages=STORY, max_tokens=60, temperature=0)
        .choices[0]
        .message.content
    )
    stop = full[25:29]
    assert stop.strip(), f"pick another stop in {full!r}"
    stops = ["<never-1>", "<never-2>", "<never-3>", stop, "<never-4>", "<never-5>"]
    reply = client.chat.completions.create(
        model=SERVED, messages=STORY, max_tokens=60, temperature=0, stop=stops
    )
    assert reply.choices[0].message.content == full[: full.index(stop)]
    assert reply.choices[0].finish_reason == "stop"


def test_the_pinned_model_answers_its_names_and_aliases_and_no_other(
    server: ServerProcess,
) -> None:
    client = client_for(server)
    card = client.models.list().data[0]
    assert card.id == SERVED and "--alias" in card.model_extra["description"]
    for name in ("demo-mtp.gguf", "DEMO-MTP", "claude-sonnet-4-5"):  # file name, case, alias
        reply = client.chat.completions.create(model=name, messages=HELLO, max_tokens=4)
        assert reply.model == SERVED and reply.choices[0].message.content
    chunks = list(
        client.completions.create(
            model="claude-haiku", prompt="def f():", max_tokens=4, stream=True
        )
    )
    assert {chunk.model for chunk in chunks} == {SERVED}
    for name in ("gpt-4o", "text-davinci-003"):
        with pytest.raises(openai.NotFoundError) as caught:
            client.chat.completions.create(model=name, messages=HELLO, max_tokens=4, stream=True)
        assert caught.value.code == "model_not_found" and caught.value.param == "model"
        assert name in caught.value.message and SERVED in caught.value.message
    with pytest.raises(openai.BadRequestError) as empty:
        client.chat.completions.create(model="", messages=HELLO, max_tokens=4)
    assert empty.value.param == "model"


def test_usage_comes_once_at_the_end_and_only_when_asked(server: ServerProcess) -> None:
    client = client_for(server)
    asked = dict(model=SERVED, messages=HELLO, max_tokens=12, temperature=0, stream=True)
    plain = list(client.chat.completions.create(**asked))
    assert all(chunk.usage is None for chunk in plain)
    assert plain[-1].model_extra["mtp"]["generated_tokens"] >= 1, "MTP statistics stay"
    with_usage = list(
        client.chat.completions.create(**asked, stream_options={"include_usage": True})
    )
    carrying = [chunk for chunk in with_usage if chunk.usage is not None]
    assert carrying == [with_usage[-1]] and with_usage[-1].choices == []
    assert (
        with_usage[-1].usage.completion_tokens == plain[-1].model_extra["mtp"]["generated_tokens"]
    )


def test_no_max_tokens_runs_to_the_context(limits_server: ServerProcess) -> None:
    """The limits server's context is 1024 tokens: a reply without max_tokens fills it (the demo
    model, greedy, does not end this story by itself), where it used to stop at 512 tokens."""
    reply = client_for(limits_server).completions.create(
        model=SERVED, prompt="Once upon a time", temperature=0
    )
    used = reply.usage.prompt_tokens + reply.usage.completion_tokens
    assert reply.choices[0].finish_reason == "length"
    assert 1024 - 2 <= used <= 1024 + 1 and reply.usage.completion_tokens > 1000


def test_a_prompt_longer_than_the_context_is_a_400_before_any_event(
    limits_server: ServerProcess,
) -> None:
    long_prompt = [{"role": "user", "content": "word " * 2000}]
    for stream in (True, False):
        with pytest.raises(openai.BadRequestError) as caught:
            reply = client_for(limits_server).chat.completions.create(
                model=SERVED, messages=long_prompt, max_tokens=4, stream=stream
            )
            list(reply) if stream else None
        assert caught.value.status_code == 400
        assert "context window" in caught.value.message and "--ctx" in caught.value.message


def test_developer_role_is_a_system_message(server: ServerProcess) -> None:
    client = client_for(server)
    prompts = [
        client.chat.completions.create(
            model=SERVED,
            messages=[{"role": role, "content": "Answer briefly."}, *HELLO],
            max_tokens=1,
        ).usage.prompt_tokens
        for role in ("developer", "system")
    ]
    assert prompts[0] == prompts[1]


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("n", 2, "one reply per request"),
        ("logprobs", True, "log-probabilities"),
        ("top_logprobs", 3, "log-probabilities"),
    ],
)
def test_fields_the_runtime_cannot_honour_are_a_400_naming_them(
    server: ServerProcess, field: str, value: object, says: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client_for(server).chat.completions.create(
            model=SERVED, messages=HELLO, max_tokens=2, **{field: value}
        )
    assert caught.value.body["param"] == field
    assert f"'{field}'" in caught.value.message and says in caught.value.message


def test_neutral_penalties_and_seed_minus_one_are_accepted(server: ServerProcess) -> None:
    reply = client_for(server).chat.completions.create(
        model=SERVED,
        messages=HELLO,
        max_tokens=4,
        presence_penalty=0,
        frequency_penalty=0,
        logprobs=False,
        n=1,
        seed=-1,
    )
    assert reply.choices[0].message.content


def test_routes_answer_without_v1(server: ServerProcess) -> None:
    client = client_for(server, base_url=server.root_url)
    reply = client.chat.completions.create(model=SERVED, messages=HELLO, max_tokens=3)
    assert reply.usage.completion_tokens >= 1
    assert client.completions.create(model=SERVED, prompt="x = ", max_tokens=2).choices[0].text
    assert [model.id for model in client.models.list().data] == [SERVED]


def test_cors_lets_the_named_origin_call_and_no_other(
    server: ServerProcess, limits_server: ServerProcess
) -> None:
    preflight = {
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type,authorization",
    }
    allowed = httpx2.options(
        f"{limits_server.base_url}/chat/completions", headers={"origin": CORS_ORIGIN, **preflight}
    )
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == CORS_ORIGIN
    other = httpx2.options(
        f"{limits_server.base_url}/chat/completions",
        headers={"origin": "http://evil.example", **preflight},
    )
    assert "access-control-allow-origin" not in other.headers
    reply = httpx2.get(f"{limits_server.base_url}/models", headers={"origin": CORS_ORIGIN})
    assert reply.headers["access-control-allow-origin"] == CORS_ORIGIN
    # without --cors no origin is allowed
    default = httpx2.get(f"{server.base_url}/models", headers={"origin": CORS_ORIGIN})
    assert "access-control-allow-origin" not in default.headers
