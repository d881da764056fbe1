"""Tools on ``/v1/messages`` with the real ``anthropic`` client, as Claude Code uses them, on the
demo model: a forced call comes back as a ``tool_use`` block whose ``input`` validates (the
grammar enforces the schema, drafts included), whole and through the SDK's stream helper; a
``tool_result`` turn is accepted and reaches the prompt; bad tool fields are 400s naming them."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx2
import jsonschema
import pytest
from anthropic import Anthropic

from app.engine.runtime.chat_format.tool_call_events import ToolCallEvents
from app.engine.server.anthropic.replies import ReplyBlocks
from tests.server.server_process import ServerProcess

pytestmark = pytest.mark.slow

ASKED = "claude-code-model"  # a Claude Code name, answered through the server's --alias claude-*
DRAFTING = {"temperature": 0.6, "mtp_depth": 3}
# Claude Code's tools carry a draft-07 "$schema" and close their objects
WEATHER_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 24},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TIME_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 24}},
    "required": ["city"],
}
TOOLS = [
    {
        "name": "get_weather",
        "description": "The current weather in a city",
        "input_schema": WEATHER_SCHEMA,
    },
    {"name": "get_time", "description": "The local time in a city", "input_schema": TIME_SCHEMA},
]
SCHEMAS = {"get_weather": WEATHER_SCHEMA, "get_time": TIME_SCHEMA}
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]


def client_for(server: ServerProcess) -> Anthropic:
    return Anthropic(base_url=server.root_url, api_key="unused", max_retries=0, timeout=120)


def test_forced_tool_use_validates_and_a_tool_result_round_trip_is_accepted(
    server: ServerProcess,
) -> None:
    client = client_for(server)
    first = client.messages.create(
        model=ASKED,
        max_tokens=200,
        messages=QUESTION,
        tools=TOOLS,
        tool_choice={"type": "tool", "name": "get_weather"},
        extra_body=DRAFTING,
    )
    assert first.stop_reason == "tool_use"
    assert [block.type for block in first.content] == ["tool_use"]
    call = first.content[0]
    assert call.name == "get_weather" and call.id.startswith("toolu_")
    jsonschema.validate(call.input, WEATHER_SCHEMA)
    assert sum(first.model_extra["mtp"]["accepted_by_depth"]) > 0

    answered = [
        *QUESTION,
        {"role": "assistant", "content": [block.model_dump() for block in first.content]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": call.id, "content": "18 degrees, sunny"},
                {"type": "text", "text": "Answer in one sentence."},
            ],
        },
    ]
    second = client.messages.create(
        model=ASKED, max_tokens=16, messages=answered, tools=TOOLS, extra_body={"temperature": 0}
    )
    assert second.content and second.stop_reason in ("end_turn", "max_tokens", "tool_use")
    # the prompt holds the tools, the question, the call and its result (the counts agree)
    counted = client.messages.count_tokens(model=ASKED, messages=answered, tools=TOOLS)
    used = second.usage.input_tokens + second.usage.cache_read_input_tokens
    assert counted.input_tokens == used
    asked = client.messages.count_tokens(model=ASKED, messages=QUESTION, tools=TOOLS)
    assert used > asked.input_tokens + 20
    bare = client.messages.count_tokens(model=ASKED, messages=QUESTION)
    assert asked.input_tokens > bare.input_tokens + 40  # the tools are in the prompt
    hidden = client.messages.count_tokens(
        model=ASKED, messages=QUESTION, tools=TOOLS, tool_choice={"type": "none"}
    )
    assert hidden.input_tokens == bare.input_tokens  # tool_choice none: the tools are not shown


def test_any_tool_streams_as_a_tool_use_block_through_the_stream_helper(
    server: ServerProcess,
) -> None:
    with client_for(server).messages.stream(
        model=ASKED,
        max_tokens=200,
        messages=QUESTION,
        tools=TOOLS,
        tool_choice={"type": "any"},
        extra_body=DRAFTING,
    ) as stream:
        events = list(stream)
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    assert [block.type for block in final.content] == ["tool_use"]
    call = final.content[0]
    assert call.id.startswith("toolu_") and call.name in SCHEMAS
    jsonschema.validate(call.input, SCHEMAS[call.name])
    starts = [event for event in events if event.type == "content_block_start"]
    assert [event.content_block.type for event in starts] == ["tool_use"]
    assert starts[0].content_block.input == {} and starts[0].content_block.id == call.id
    partial = [
        event.delta.partial_json
        for event in events
        if event.type == "content_block_delta" and event.delta.type == "input_json_delta"
    ]
    assert json.loads("".join(partial)) == call.input
    assert [event.type for event in events][-3:] == [
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]


def test_a_result_for_an_unknown_call_and_bad_tool_fields_are_400s(server: ServerProcess) -> None:
    client = client_for(server)
    stray_result = [
        *QUESTION,
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_nope", "content": "18"}],
        },
    ]
    bad: list[tuple[dict[str, Any], str]] = [
        ({"messages": stray_result}, "'messages[1].content[0].tool_use_id'"),
        (
            {"tool_choice": {"type": "tool", "name": "launch_rocket"}},
            "'tool_choice' names the tool \"launch_rocket\"",
        ),
        (
            {"tools": [{"type": "web_search_20250305", "name": "web_search"}]},
            'server tool "web_search_20250305"',
        ),
        ({"tools": [{"name": "no_schema"}]}, "'tools[0].input_schema' must be a JSON schema"),
        ({"tools": [], "tool_choice": {"type": "any"}}, "'tools' is empty"),
    ]
    for fields, expected in bad:
        body = {"model": ASKED, "max_tokens": 8, "messages": QUESTION, "tools": TOOLS, **fields}
        with pytest.raises(anthropic.BadRequestError) as caught:
            client.messages.create(**body)
        assert expected in caught.value.body["error"]["message"]
        streamed = httpx2.post(
            f"{server.root_url}/v1/messages", json={**body, "stream": True}, timeout=60
        )
        assert streamed.status_code == 400  # before any event


def test_text_then_a_call_stream_as_a_text_block_then_a_tool_use_block() -> None:
    """What a model that writes before calling (``auto``) gets: the markup never reaches the
    client, however the pieces split it, and the call's input comes in pieces as it is
    written."""
    reply = (
        'Let me look.<tool_call>\n{"name": "get_time", "arguments": {"city": "Oslo"}}\n</tool_call>'
    )
    blocks, reader = ReplyBlocks(reads_calls=True), ToolCallEvents()
    pieces = [reply[at : at + 5] for at in range(0, len(reply), 5)]
    streamed = blocks.opening() + "".join(
        blocks.feed(event) for piece in pieces for event in reader.feed(piece)
    )
    streamed += "".join(blocks.feed(event) for event in reader.finish()) + blocks.finish()
    events = [json.loads(block.split("\n")[1][6:]) for block in streamed.strip().split("\n\n")]
    kinds = [(event["type"], event["index"]) for event in events]
    call_start = kinds.index(("content_block_start", 1))
    assert kinds[:call_start] == [
        ("content_block_start", 0),
        *[("content_block_delta", 0)] * (call_start - 2),
        ("content_block_stop", 0),
    ]
    assert kinds[call_start + 1 : -1] == [("content_block_delta", 1)] * (
        len(kinds) - call_start - 2
    )
    assert kinds[-1] == ("content_block_stop", 1) and len(kinds) - call_start > 3
    text = "".join(
        event["delta"]["text"] for event in events if event["index"] == 0 and "delta" in event
    )
    assert text == "Let me look."
    assert events[call_start]["content_block"]["name"] == "get_time"
    partial = "".join(event["delta"]["partial_json"] for event in events[call_start + 1 : -1])
    assert json.loads(partial) == {"city": "Oslo"}
    assert blocks.called
