"""The Responses API with OpenAI's own client (``client.responses.create``, whole and
``stream=True``, and the SDK's ``responses.stream`` helper), and with openai-agents' default
model class (``OpenAIResponsesModel``): an agent whose function tool the model calls, run whole
and streamed, as a user of the SDK runs one."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated

import jsonschema
import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.items import ToolCallItem, ToolCallOutputItem
from openai import AsyncOpenAI, OpenAI
from pydantic import BaseModel, Field

from tests.server.server_process import ServerProcess

pytestmark = pytest.mark.slow

CITY = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 24}},
    "required": ["city"],
}
WEATHER_TOOL = {"type": "function", "name": "get_weather", "parameters": CITY}
GREEDY = {"temperature": 0}


def client_for(server: ServerProcess) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=120)


def test_a_response_whole_and_streamed_says_the_same(server: ServerProcess) -> None:
    client = client_for(server)
    whole = client.responses.create(
        model="demo-mtp", input="Tell me about dragons.", max_output_tokens=16, **GREEDY
    )
    assert whole.model == "demo-mtp" and whole.status == "incomplete"
    assert whole.output_text and whole.usage.output_tokens == 16
    assert whole.model_extra["mtp"]["generated_tokens"] == 16
    events = list(
        client.responses.create(
            model="demo-mtp", input="Tell me about dragons.", max_output_tokens=16, stream=True,
            **GREEDY,
        )
    )  # fmt: skip
    deltas = [event.delta for event in events if event.type == "response.output_text.delta"]
    assert "".join(deltas) == whole.output_text and len(deltas) > 1
    assert events[-1].type == "response.incomplete"
    assert events[-1].response.output_text == whole.output_text


def test_a_conversation_continues_from_a_kept_response(server: ServerProcess) -> None:
    client = client_for(server)
    first = client.responses.create(model="demo-mtp", input="Hello!", max_output_tokens=8, **GREEDY)
    second = client.responses.create(
        model="demo-mtp", input="And then?", previous_response_id=first.id, max_output_tokens=8,
        **GREEDY,
    )  # fmt: skip
    assert second.previous_response_id == first.id
    assert second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens
    assert second.usage.input_tokens_details.cached_tokens > 0  # the first turn's prefill kept
    assert client.responses.retrieve(second.id).output_text == second.output_text


def test_a_forced_function_call_through_the_stream_helper(server: ServerProcess) -> None:
    client = client_for(server)
    with client.responses.stream(
        model="demo-mtp", input="What is the weather in Paris?", tools=[WEATHER_TOOL],
        tool_choice="required", **GREEDY,
    ) as stream:  # fmt: skip
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    [call] = final.output
    assert call.type == "function_call" and call.name == "get_weather"
    jsonschema.validate(json.loads(call.arguments), CITY)
    assert kinds.count("response.function_call_arguments.delta") > 1
    result = client.responses.create(
        model="demo-mtp",
        input=[
            {"role": "user", "content": "What is the weather in Paris?"},
            {"type": "function_call", "call_id": call.call_id, "name": call.name,
             "arguments": call.arguments},
            {"type": "function_call_output", "call_id": call.call_id, "output": "Sunny."},
        ],
        tools=[WEATHER_TOOL],
        max_output_tokens=8,
    )  # fmt: skip
    assert result.output[0].type == "message" and result.output_text


@function_tool
def get_weather(city: Annotated[str, Field(max_length=24)]) -> str:
    """The weather in a city."""
    return f"It is sunny in {city}."


class Forecast(BaseModel):
    city: str = Field(max_length=24)
    sunny: bool


def _agent(server: ServerProcess) -> Agent:
    """The tiny demo model calls no tool unless made to, and rambles: the first turn must call
    (the agent then lets it choose), and the answer is a structured ``Forecast`` (held to its
    schema by ``text.format``, so it ends)."""
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
    return Agent(
        name="weather",
        instructions="Answer with the weather tool.",
        tools=[get_weather],
        output_type=Forecast,
        model=OpenAIResponsesModel("demo-mtp", openai_client=client),
        model_settings=ModelSettings(tool_choice="required", temperature=0, max_tokens=200),
    )


def test_an_openai_agents_agent_calls_its_tool_and_answers(server: ServerProcess) -> None:
    result = Runner.run_sync(_agent(server), "What is the weather in Paris?", max_turns=4)
    kinds = [type(item) for item in result.new_items]
    assert ToolCallItem in kinds and ToolCallOutputItem in kinds
    [output] = [item for item in result.new_items if isinstance(item, ToolCallOutputItem)]
    assert output.output.startswith("It is sunny in ")
    assert isinstance(result.final_output, Forecast)
    assert [line for line in server.lines if "POST /v1/responses 200" in line]


def test_an_openai_agents_agent_runs_streamed(server: ServerProcess) -> None:
    async def run() -> list[str]:
        streamed = Runner.run_streamed(_agent(server), "Weather in Oslo?", max_turns=4)
        kinds = [event.type async for event in streamed.stream_events()]
        assert isinstance(streamed.final_output, Forecast)
        return kinds

    kinds = asyncio.run(run())
    assert "raw_response_event" in kinds and "run_item_stream_event" in kinds
