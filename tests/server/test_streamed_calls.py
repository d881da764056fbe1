"""Tool calls written while they stream, and calls the length limit cut off, on all three APIs
through their real SDKs: the call opens as soon as its name is written and its arguments come
in pieces; a call cut off is reported as a call with the reason the reply ended, never as raw
``<tool_call>`` text."""

from __future__ import annotations

import json

import pytest
from anthropic import Anthropic
from openai import OpenAI

from tests.server.server_process import ServerProcess

pytestmark = pytest.mark.slow

LONG_NOTE = {
    "type": "object",
    "properties": {"note": {"type": "string", "minLength": 4000}},
    "required": ["note"],
}
"""A call whose arguments take far more tokens than the limit below allows."""
CUT_AT = 300
"""Tokens enough to span many of the worker's 20-ms chunks, so a streamed call comes in pieces
even on a fast machine."""
QUESTION = "Write a note."
SAVE = {"name": "save_note", "description": "Save a note", "parameters": LONG_NOTE}


def openai_client(server: ServerProcess) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=120)


def _cut_prefix(arguments: str) -> None:
    assert arguments.startswith('{"note": "') and len(arguments) > len('{"note": "')
    with pytest.raises(ValueError):
        json.loads(arguments)


def test_openai_a_cut_call_is_a_call_with_finish_reason_length(server: ServerProcess) -> None:
    asked = dict(
        model="demo-mtp",
        messages=[{"role": "user", "content": QUESTION}],
        tools=[{"type": "function", "function": SAVE}],
        tool_choice="required",
        max_tokens=CUT_AT,
        temperature=0,
    )
    whole = openai_client(server).chat.completions.create(**asked)
    choice = whole.choices[0]
    assert choice.finish_reason == "length" and choice.message.content is None
    assert [call.function.name for call in choice.message.tool_calls] == ["save_note"]
    _cut_prefix(choice.message.tool_calls[0].function.arguments)
    chunks = list(openai_client(server).chat.completions.create(**asked, stream=True))
    deltas = [delta for chunk in chunks for delta in (chunk.choices[0].delta.tool_calls or [])]
    assert deltas[0].function.name == "save_note" and len(deltas) > 2
    streamed = "".join(delta.function.arguments for delta in deltas)
    assert streamed == choice.message.tool_calls[0].function.arguments
    assert chunks[-1].choices[0].finish_reason == "length"
    assert not any("<tool_call>" in (c.choices[0].delta.content or "") for c in chunks)


def test_anthropic_a_cut_call_is_a_tool_use_with_stop_reason_max_tokens(
    server: ServerProcess,
) -> None:
    client = Anthropic(base_url=server.root_url, api_key="unused", max_retries=0)
    tool = {"name": "save_note", "description": "Save a note", "input_schema": LONG_NOTE}
    asked = dict(
        model="claude-code-local",
        max_tokens=CUT_AT,
        extra_body={"temperature": 0},
        messages=[{"role": "user", "content": QUESTION}],
        tools=[tool],
        tool_choice={"type": "any"},
    )
    whole = client.messages.create(**asked)
    assert whole.stop_reason == "max_tokens"
    assert [block.type for block in whole.content] == ["tool_use"]
    note = whole.content[0].input["note"]
    assert isinstance(note, str) and len(note) > 4
    with client.messages.stream(**asked) as stream:
        events = list(stream)
        final = stream.get_final_message()
    pieces = [
        e for e in events if e.type == "content_block_delta" and e.delta.type == "input_json_delta"
    ]
    streamed = "".join(event.delta.partial_json for event in pieces)
    assert len(pieces) > 2 and streamed.startswith('{"note": "' + note)
    assert final.stop_reason == "max_tokens"
    assert [(block.type, block.name) for block in final.content] == [("tool_use", "save_note")]


def test_responses_a_cut_call_is_an_incomplete_function_call(server: ServerProcess) -> None:
    client = openai_client(server)
    asked = dict(
        model="demo-mtp",
        input=QUESTION,
        tools=[{"type": "function", **SAVE}],
        tool_choice="required",
        max_output_tokens=CUT_AT,
        temperature=0,
    )
    whole = client.responses.create(**asked)
    assert whole.status == "incomplete"
    assert whole.incomplete_details.reason == "max_output_tokens"
    assert [(item.type, item.status) for item in whole.output] == [("function_call", "incomplete")]
    _cut_prefix(whole.output[0].arguments)
    events = list(client.responses.create(**asked, stream=True))
    kinds = [event.type for event in events]
    assert kinds[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    deltas = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert len(deltas) > 2 and "".join(deltas) == whole.output[0].arguments
    assert kinds[-1] == "response.incomplete"
    assert [e.sequence_number for e in events] == list(range(len(events)))
