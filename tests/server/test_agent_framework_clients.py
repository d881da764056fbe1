"""LangChain's OpenAI chat model against ``serve``, as agent frameworks use it: a whole reply,
a streamed one whose usage is counted once (it used to double, usage came in two chunks), any
model name, and stop strings passed through ``bind(stop=...)``."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessageChunk, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI

from tests.server.server_process import ServerProcess

pytestmark = pytest.mark.slow

SERVED = "demo-mtp"
QUESTION = [SystemMessage("You answer briefly."), HumanMessage("Tell me about dragons.")]


def chat_model(server: ServerProcess, **settings: object) -> ChatOpenAI:
    defaults: dict[str, object] = {"temperature": 0, "max_tokens": 24, "max_retries": 0}
    return ChatOpenAI(
        base_url=server.base_url, api_key="unused", model="demo-mtp", **{**defaults, **settings}
    )


def test_streamed_usage_is_counted_once_and_equals_the_whole_reply(server: ServerProcess) -> None:
    whole = chat_model(server).invoke(QUESTION)
    assert whole.response_metadata["model_name"] == SERVED and whole.content
    streamed: AIMessageChunk | None = None
    for chunk in chat_model(server, stream_usage=True).stream(QUESTION):
        streamed = chunk if streamed is None else streamed + chunk
    assert streamed is not None and streamed.content == whole.content
    assert streamed.usage_metadata is not None and whole.usage_metadata is not None
    assert streamed.usage_metadata["output_tokens"] == whole.usage_metadata["output_tokens"]
    assert streamed.usage_metadata["input_tokens"] == whole.usage_metadata["input_tokens"]


def test_bound_stop_strings_cut_the_reply(server: ServerProcess) -> None:
    full = str(chat_model(server, max_tokens=60).invoke(QUESTION).content)
    stop = full[20:24]
    assert stop.strip(), f"pick another stop in {full!r}"
    stops = ["<a>", "<b>", "<c>", "<d>", "<e>", stop]
    cut = chat_model(server, max_tokens=60).bind(stop=stops).invoke(QUESTION)
    assert cut.content == full[: full.index(stop)]
