"""``/v1/messages`` and ``/v1/messages/count_tokens`` called with the real ``anthropic`` client, as
Claude Code and scripts call Anthropic: whole and streamed replies (Anthropic's exact event
sequence, read raw), system prompts as a string or blocks, multi-part content, stop sequences,
sampling fields, token counting, Anthropic-shaped errors and the ``x-api-key`` header."""

from __future__ import annotations

import json

import anthropic
import httpx2
import pytest
from anthropic import Anthropic

from tests.server.conftest import API_KEY
from tests.server.server_process import ServerProcess

pytestmark = pytest.mark.slow

SERVED = "demo-mtp"
ASKED = "claude-code-model"  # a Claude Code name, answered through the server's --alias claude-*
HELLO = [{"role": "user", "content": "Hello, who are you?"}]
STORY = [{"role": "user", "content": "Write a long story about a dragon."}]
# anthropic 2.x dropped the sampling arguments (newer Claude models choose their own); clients
# that set them, as llama-server's users do, send them in the body
GREEDY = {"extra_body": {"temperature": 0}}


def client_for(server: ServerProcess, key: str = "unused") -> Anthropic:
    return Anthropic(base_url=server.root_url, api_key=key, max_retries=0, timeout=120)


def test_whole_message_names_the_served_model_and_carries_usage_and_mtp(
    server: ServerProcess,
) -> None:
    reply = client_for(server).messages.create(
        model=ASKED, max_tokens=24, messages=HELLO, extra_body={"temperature": 0, "mtp_depth": 3}
    )
    assert reply.type == "message" and reply.role == "assistant" and reply.model == SERVED
    assert [block.type for block in reply.content] == ["text"] and reply.content[0].text
    assert reply.stop_reason in ("end_turn", "max_tokens") and reply.stop_sequence is None
    assert 0 < reply.usage.output_tokens <= 24 and reply.usage.input_tokens > 5
    mtp = reply.model_extra["mtp"]
    assert mtp["depth"] == 3 and mtp["generated_tokens"] == reply.usage.output_tokens
    assert mtp["drafted_by_depth"][0] > 0
    server.wait_for_line(f"Claude Code: base URL {server.root_url} ")  # serve says where


def test_streamed_events_come_in_anthropics_order_and_equal_the_whole_reply(
    server: ServerProcess,
) -> None:
    client = client_for(server)
    # long enough to span several of the server's 20 ms chunks on a fast machine
    asked = dict(model=ASKED, max_tokens=256, messages=STORY)
    whole = client.messages.create(**asked, **GREEDY)
    with client.messages.stream(**asked, **GREEDY) as stream:
        streamed_text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert streamed_text == whole.content[0].text == final.content[0].text
    assert final.stop_reason == whole.stop_reason and final.model == SERVED
    assert final.usage.output_tokens == whole.usage.output_tokens

    raw = httpx2.post(
        f"{server.root_url}/v1/messages",
        json={**asked, "stream": True, "temperature": 0},
        timeout=120,
    )
    assert raw.status_code == 200 and raw.headers["content-type"].startswith("text/event-stream")
    events = [
        (block.split("\n")[0].removeprefix("event: "), json.loads(block.split("\n")[1][6:]))
        for block in raw.text.strip().split("\n\n")
    ]
    # a stream silent for 10 s (a busy machine) gets keep-alive pings between its deltas too
    names = [name for index, (name, _) in enumerate(events) if index < 3 or name != "ping"]
    deltas = names.count("content_block_delta")
    assert deltas >= 2, "the reply came in one piece"  # text goes out per 20 ms chunk
    assert names == [
        "message_start",
        "content_block_start",
        "ping",
        *["content_block_delta"] * deltas,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert all(data["type"] == name for name, data in events)
    assert events[3][1]["delta"]["type"] == "text_delta"
    message_delta = events[-2][1]
    assert message_delta["delta"]["stop_reason"] == whole.stop_reason
    assert message_delta["usage"]["output_tokens"] == whole.usage.output_tokens
    assert message_delta["mtp"]["generated_tokens"] == whole.usage.output_tokens


def test_system_prompt_as_string_or_blocks_and_multi_part_content(server: ServerProcess) -> None:
    client = client_for(server)
    system = "You are a terse assistant who answers in one line."
    as_string = client.messages.create(
        model=ASKED, max_tokens=8, **GREEDY, system=system, messages=HELLO
    )
    as_blocks = client.messages.create(
        model=ASKED,
        max_tokens=8,
        **GREEDY,
        system=[{"type": "text", "text": system}],
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Hello, "},
                    {"type": "text", "text": "who are you?"},
                ],
            }
        ],
    )
    bare = client.messages.create(model=ASKED, max_tokens=8, **GREEDY, messages=HELLO)
    prompt = as_string.usage.input_tokens + as_string.usage.cache_read_input_tokens
    assert prompt > bare.usage.input_tokens + bare.usage.cache_read_input_tokens + 5
    assert as_blocks.content[0].text == as_string.content[0].text


def test_stop_sequences_end_the_reply_and_are_named(server: ServerProcess) -> None:
    client = client_for(server)
    full = client.messages.create(model=ASKED, max_tokens=60, **GREEDY, messages=STORY)
    text = full.content[0].text
    stop = text[20:24]
    assert stop.strip(), f"pick another stop in {text!r}"
    stops = ["never-appears-1", stop, "never-appears-2"]
    cut = client.messages.create(
        model=ASKED, max_tokens=60, **GREEDY, messages=STORY, stop_sequences=stops
    )
    assert cut.stop_reason == "stop_sequence" and cut.stop_sequence == stop
    assert cut.content[0].text == text[: text.index(stop)]
    with client.messages.stream(
        model=ASKED, max_tokens=60, **GREEDY, messages=STORY, stop_sequences=stops
    ) as stream:
        streamed = stream.get_final_message()
    assert streamed.stop_reason == "stop_sequence" and streamed.stop_sequence == stop
    assert streamed.content[0].text == cut.content[0].text


def test_sampling_fields_are_applied(server: ServerProcess) -> None:
    client = client_for(server)
    sampled = {
        client.messages.create(
            model=ASKED,
            max_tokens=16,
            messages=STORY,
            extra_body={"temperature": 1.0, "top_p": 0.95, "top_k": 40},
        )
        .content[0]
        .text
        for _ in range(3)
    }
    assert len(sampled) > 1, "temperature 1 gave the same reply three times"
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(model=ASKED, max_tokens=8, messages=HELLO, extra_body={"top_p": 0})
    assert "top-p 0.0 is invalid" in caught.value.message


def test_count_tokens_matches_the_prompt_a_message_uses(server: ServerProcess) -> None:
    client = client_for(server)
    system = "You count things."
    counted = client.messages.count_tokens(model=ASKED, system=system, messages=STORY)
    reply = client.messages.create(
        model=ASKED, max_tokens=4, **GREEDY, system=system, messages=STORY
    )
    used = reply.usage.input_tokens + reply.usage.cache_read_input_tokens
    assert counted.input_tokens == used > 10


def test_errors_have_anthropics_shape_and_name_the_field(server: ServerProcess) -> None:
    client = client_for(server)
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(
            model=ASKED, max_tokens=8, messages=[{"role": "tool", "content": "hi"}]
        )
    body = caught.value.body
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert (
        "'messages[0].role'" in body["error"]["message"] and "'system'" in body["error"]["message"]
    )
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(
            model=ASKED,
            max_tokens=8,
            messages=[
                {
                    "role": "user",
                    "content": [{"type": "search_result", "source": "x", "title": "x"}],
                }
            ],
        )
    message = caught.value.body["error"]["message"]
    assert message.startswith("'messages[0].content[0]' is a block of type \"search_result\"")
    missing = httpx2.post(f"{server.root_url}/v1/messages/nothing", json={})
    assert missing.status_code == 404


def test_x_api_key_is_checked_and_anthropic_version_accepted(keyed_server: ServerProcess) -> None:
    with pytest.raises(anthropic.AuthenticationError) as caught:
        client_for(keyed_server, "wrong-key").messages.create(
            model=ASKED, max_tokens=4, messages=HELLO
        )
    assert caught.value.body["error"]["type"] == "authentication_error"
    reply = client_for(keyed_server, API_KEY).messages.create(
        model=ASKED, max_tokens=4, messages=HELLO
    )  # the SDK sends x-api-key and anthropic-version
    assert reply.usage.output_tokens >= 1
    assert API_KEY not in "".join(keyed_server.lines)


def test_a_prompt_longer_than_the_context_is_a_400_in_anthropics_words_before_any_event(
    limits_server: ServerProcess,
) -> None:
    """Claude Code compacts its conversation when it reads "prompt is too long: N tokens > M
    maximum"; the count is the one count_tokens gives."""
    client = client_for(limits_server)
    too_long = [{"role": "user", "content": "word " * 2000}]  # the limits server's context: 1024
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(model=ASKED, max_tokens=4, messages=too_long)
    counted = client.messages.count_tokens(model=ASKED, messages=too_long).input_tokens
    message = caught.value.body["error"]["message"]
    assert message == f"prompt is too long: {counted} tokens > 1023 maximum"
    with (
        pytest.raises(anthropic.BadRequestError) as caught,
        client.messages.stream(model=ASKED, max_tokens=4, messages=too_long) as stream,
    ):
        stream.get_final_message()
    assert caught.value.body["error"]["type"] == "invalid_request_error"
