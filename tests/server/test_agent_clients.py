"""Agent frameworks and multi-provider clients against ``serve``, as their users run them:
pydantic-ai (an agent with a tool and a structured result, over chat completions), LiteLLM
(``completion`` over the OpenAI and the Anthropic API, whole and streamed, with a forced tool
call; ``responses``), LangChain's ``create_agent`` (a tool loop: a call, the tool's result, the
answer) and Simon Willison's ``llm`` (an OpenAI-compatible model from
``extra-openai-models.yaml``: a prompt, streamed, and a tool chain).

The tiny demo model calls a tool only when made to, so each agent is set up the way that forces
a call (a structured result, ``tool_choice="required"``); the grammar then holds the call to its
schema, which is what lets these loops run to the end."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import jsonschema
import pytest
from pydantic import BaseModel, Field

from tests.server.server_process import ServerProcess

pytestmark = pytest.mark.slow

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of its price list

CITY = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 24}},
    "required": ["city"],
}
CHAT_TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": CITY}}]
WEATHER_QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]


class Weather(BaseModel):
    city: str = Field(max_length=24)
    sunny: bool


def get_weather(city: Annotated[str, Field(max_length=24)]) -> str:
    """The weather in a city."""
    return f"It is sunny in {city}."


def test_pydantic_ai_agent_runs_its_tools_to_a_structured_result(server: ServerProcess) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    provider = OpenAIProvider(base_url=server.base_url, api_key="unused")
    agent = Agent(
        OpenAIChatModel("demo-mtp", provider=provider),
        output_type=Weather,
        tools=[get_weather],
        model_settings={"temperature": 0, "max_tokens": 200},
    )
    result = agent.run_sync("What is the weather in Paris?")
    assert isinstance(result.output, Weather)
    calls = [
        part
        for message in result.all_messages()
        for part in getattr(message, "parts", [])
        if isinstance(part, ToolCallPart)
    ]
    assert calls and calls[-1].tool_name == "final_result"


def test_litellm_completion_over_both_apis(server: ServerProcess) -> None:
    import litellm

    routes = [
        ("openai/demo-mtp", server.base_url),
        ("anthropic/claude-sonnet-4-5", server.root_url),
    ]
    for model, base in routes:
        reply = litellm.completion(
            model=model, api_base=base, api_key="unused", messages=WEATHER_QUESTION,
            max_tokens=8, temperature=0,
        )  # fmt: skip
        assert reply.choices[0].message.content and reply.usage.completion_tokens == 8
        forced = litellm.completion(
            model=model, api_base=base, api_key="unused", messages=WEATHER_QUESTION,
            tools=CHAT_TOOLS, tool_choice="required", max_tokens=100, temperature=0,
        )  # fmt: skip
        [call] = forced.choices[0].message.tool_calls
        assert call.function.name == "get_weather"
        jsonschema.validate(json.loads(call.function.arguments), CITY)
        chunks = list(
            litellm.completion(
                model=model, api_base=base, api_key="unused", messages=WEATHER_QUESTION,
                tools=CHAT_TOOLS, tool_choice="required", max_tokens=100, temperature=0,
                stream=True,
            )
        )  # fmt: skip
        [streamed] = litellm.stream_chunk_builder(chunks).choices[0].message.tool_calls
        assert json.loads(streamed.function.arguments) == json.loads(call.function.arguments)


def test_litellm_responses(server: ServerProcess) -> None:
    import litellm

    reply = litellm.responses(
        model="openai/demo-mtp", api_base=server.base_url, api_key="unused",
        input="Tell me about dragons.", max_output_tokens=16,
    )  # fmt: skip
    assert reply.output[0].content[0].text


def test_langchain_create_agent_runs_its_tool_loop(server: ServerProcess) -> None:
    from langchain.agents import create_agent
    from langchain.agents.middleware import ModelRequest, wrap_model_call
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    @wrap_model_call
    def call_first(request: ModelRequest, handler: Any) -> Any:
        """The first turn must call a tool (the demo model calls none by itself); then the
        model answers from the tool's result."""
        if not any(isinstance(message, ToolMessage) for message in request.messages):
            request = request.override(tool_choice="any")
        return handler(request)

    model = ChatOpenAI(
        base_url=server.base_url, api_key="unused", model="demo-mtp", temperature=0, max_tokens=120,
        max_retries=0,
    )  # fmt: skip
    agent = create_agent(model, tools=[tool(get_weather)], middleware=[call_first])
    result = agent.invoke({"messages": WEATHER_QUESTION})
    kinds = [type(message).__name__ for message in result["messages"]]
    assert kinds == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    [called] = result["messages"][1].tool_calls
    assert called["name"] == "get_weather" and len(called["args"]["city"]) <= 24
    assert result["messages"][2].content.startswith("It is sunny in ")
    answer = result["messages"][3]
    assert isinstance(answer, AIMessage) and answer.content and not answer.tool_calls


@pytest.fixture
def llm_models(server: ServerProcess, tmp_path: Path) -> Iterator[Any]:
    """``llm`` set up as its docs say for an OpenAI-compatible server: a model in
    ``extra-openai-models.yaml`` under ``LLM_USER_PATH``."""
    (tmp_path / "extra-openai-models.yaml").write_text(
        f'- model_id: local-demo\n  model_name: demo-mtp\n  api_base: "{server.base_url}"\n'
        "  supports_tools: true\n",
        encoding="utf-8",
    )
    previous = os.environ.get("LLM_USER_PATH")
    os.environ["LLM_USER_PATH"] = str(tmp_path)
    import llm

    yield llm
    if previous is None:
        del os.environ["LLM_USER_PATH"]
    else:
        os.environ["LLM_USER_PATH"] = previous


def test_llm_prompts_streams_and_chains_tools(llm_models: Any, server: ServerProcess) -> None:
    model = llm_models.get_model("local-demo")
    whole = model.prompt("Tell me about dragons.", key="unused", max_tokens=12, temperature=0)
    assert whole.text() and whole.usage().output == 12
    streamed = model.prompt(
        "Tell me about dragons.", key="unused", max_tokens=12, temperature=0, stream=True
    )
    assert "".join(streamed) == whole.text()
    chain = model.chain(
        "What is the weather in Paris?", tools=[get_weather], key="unused",
        options={"max_tokens": 30, "temperature": 0},
    )  # fmt: skip
    assert chain.text()
    assert [line for line in server.lines if "POST /v1/chat/completions 200" in line]
