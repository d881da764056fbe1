"""Tool calls and structured output through ``mtp-studio serve``, with the real ``openai`` client
and LangChain's ``with_structured_output``, on the demo model.

The demo model only writes Python; every call and JSON reply below validates because the server
enforces the schema while decoding (drafts included: the requests draft with MTP).
"""

from __future__ import annotations

import json

import httpx2
import jsonschema
import openai
import pytest
from langchain_openai import ChatOpenAI
from openai import OpenAI
from pydantic import BaseModel, Field

from tests.server.server_process import ServerProcess

pytestmark = pytest.mark.slow

MODEL = "demo-mtp"
DRAFTING = {"mtp_depth": 3}
WEATHER_PARAMETERS = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 24},
        "unit": {"enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The current weather in a city",
            "parameters": WEATHER_PARAMETERS,
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "The local time in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "maxLength": 24}},
                "required": ["city"],
            },
        },
    },
]
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 130},
        "languages": {"type": "array", "items": {"enum": ["python", "c", "rust"]}, "maxItems": 3},
    },
    "required": ["name", "age", "languages"],
    "additionalProperties": False,
}


def client_for(server: ServerProcess) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=120)


def test_forced_tool_call_validates_and_a_tool_result_turn_is_accepted(
    server: ServerProcess,
) -> None:
    client = client_for(server)
    first = client.chat.completions.create(
        model=MODEL,
        messages=QUESTION,
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        temperature=0.6,
        max_tokens=200,
        extra_body=DRAFTING,
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls
    assert calls and [call.function.name for call in calls] == ["get_weather"]
    jsonschema.validate(json.loads(calls[0].function.arguments), WEATHER_PARAMETERS)
    assert calls[0].id.startswith("call_")

    second = client.chat.completions.create(
        model=MODEL,
        messages=[
            *QUESTION,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call.model_dump() for call in calls],
            },
            {"role": "tool", "tool_call_id": calls[0].id, "content": '{"temperature": 18}'},
        ],
        tools=TOOLS,
        temperature=0,
        max_tokens=16,
    )
    assert second.choices[0].message.content  # the demo model answers in prose (Python)
    assert second.choices[0].message.tool_calls is None
    # the prompt holds the tools, the question, the call and its result
    assert second.usage.prompt_tokens > first.usage.prompt_tokens + 20


def test_required_tool_call_streams_as_tool_calls_deltas_as_it_is_written(
    server: ServerProcess,
) -> None:
    """The first delta names the call (id, type, name), the ones after carry its arguments
    (in pieces as they are written: tests/server/test_streamed_calls.py); joined they are the
    whole arguments."""
    stream = client_for(server).chat.completions.create(
        model=MODEL,
        messages=QUESTION,
        tools=TOOLS,
        tool_choice="required",
        temperature=0.6,
        max_tokens=200,
        stream=True,
        extra_body=DRAFTING,
    )
    deltas, reasons, content = [], [], []
    for chunk in stream:
        choice = chunk.choices[0]
        deltas.extend(choice.delta.tool_calls or [])
        content.append(choice.delta.content or "")
        reasons.append(choice.finish_reason)
    assert reasons[-1] == "tool_calls"
    assert "".join(content) == ""
    assert {delta.index for delta in deltas} == {0} and len(deltas) >= 2
    first = deltas[0]
    assert first.id and first.type == "function" and first.function.arguments == ""
    assert first.function.name in ("get_weather", "get_time")
    assert all(delta.id is None and delta.function.name is None for delta in deltas[1:])
    arguments = "".join(delta.function.arguments for delta in deltas)
    schema = TOOLS[0 if first.function.name == "get_weather" else 1]["function"]["parameters"]
    jsonschema.validate(json.loads(arguments), schema)


def test_json_schema_reply_validates_at_a_sampling_temperature(server: ServerProcess) -> None:
    for seed in range(3):
        reply = client_for(server).chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "Describe a programmer."}],
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "person", "schema": PERSON, "strict": True},
            },
            temperature=0.6,
            seed=seed,
            max_tokens=300,
            extra_body=DRAFTING,
        )
        assert reply.choices[0].finish_reason == "stop"
        jsonschema.validate(json.loads(reply.choices[0].message.content), PERSON)
        assert sum(reply.model_extra["mtp"]["accepted_by_depth"]) > 0


def test_json_object_reply_is_an_object(server: ServerProcess) -> None:
    reply = client_for(server).chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Give me JSON."}],
        response_format={"type": "json_object"},
        temperature=0,
        max_tokens=400,
    )
    if reply.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(reply.choices[0].message.content), dict)
    else:  # cut by max_tokens: still the start of an object
        assert reply.choices[0].message.content.startswith("{")


def test_bad_schema_and_unknown_function_are_400s_before_any_stream(
    server: ServerProcess,
) -> None:
    client = client_for(server)
    with pytest.raises(openai.BadRequestError, match=r"response_format\.json_schema"):
        client.chat.completions.create(
            model=MODEL,
            messages=QUESTION,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "bad", "schema": {"type": "no-such-type"}},
            },
            stream=True,
        )
    with pytest.raises(openai.BadRequestError, match="'tool_choice' names the function"):
        client.chat.completions.create(
            model=MODEL,
            messages=QUESTION,
            tools=TOOLS,
            tool_choice={"type": "function", "function": {"name": "launch_rocket"}},
        )


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"tools": {"name": "f"}}, "tools"),
        (
            {"tools": [{"type": "function", "function": {"name": "no spaces"}}]},
            "tools[0].function.name",
        ),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"response_format": {"type": "xml"}}, "response_format"),
        ({"messages": [{"role": "tool", "content": "18"}]}, "messages[0].tool_call_id"),
        (
            {"messages": [{"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]}]},
            "messages[0].tool_calls[0]",
        ),
    ],
)
def test_bad_tool_and_format_fields_are_400s_naming_the_field(
    server: ServerProcess, fields: dict[str, object], param: str
) -> None:
    body = {"model": MODEL, "messages": QUESTION, "stream": True, **fields}
    response = httpx2.post(f"{server.base_url}/chat/completions", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == param


class Programmer(BaseModel):
    """A programmer."""

    name: str = Field(max_length=20)
    years_of_experience: int = Field(ge=0, le=60)


def test_langchain_with_structured_output_gets_a_validated_object(
    server: ServerProcess,
) -> None:
    llm = ChatOpenAI(
        model=MODEL,
        base_url=server.base_url,
        api_key="unused",
        temperature=0.6,
        max_tokens=200,
        max_retries=0,
    )
    for method in ("json_schema", "function_calling"):
        result = llm.with_structured_output(Programmer, method=method).invoke(
            "Describe a programmer."
        )
        assert isinstance(result, Programmer), method
