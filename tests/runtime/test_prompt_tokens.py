"""A request's prompt tokens, read from the demo GGUF's vocabulary loaded without its weights
(what ``count_tokens`` uses): a last assistant message is continued, a template variable reaches
the template, and the count is the prompt the worker prefills."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.engine.runtime.backends.llama_cpp.vocabulary_only import VocabularyOnly
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.chat_format.tools import ToolCall
from app.engine.runtime.core.demo_model import demo_model_path
from app.engine.runtime.core.prompt import prompt_text, prompt_token_ids
from app.engine.runtime.core.request import GenerationRequest
from app.engine.runtime.process.client import RuntimeClient
from app.engine.runtime.process.prompt_counter import PromptCounter, TextOnly

QUESTION = ChatMessage("user", "Tell me about dragons.")


@pytest.fixture(scope="module")
def vocabulary() -> Iterator[TextOnly]:
    opened = VocabularyOnly(demo_model_path())
    yield TextOnly(opened)
    opened.close()


def test_a_last_assistant_message_is_continued_not_closed(vocabulary: TextOnly) -> None:
    opened = prompt_text(vocabulary, GenerationRequest(messages=(QUESTION,)), "demo")
    assert opened.endswith("<|im_start|>assistant\n")
    prefill = GenerationRequest(messages=(QUESTION, ChatMessage("assistant", "Dragons are")))
    assert prompt_text(vocabulary, prefill, "demo") == opened + "Dragons are"
    call = ToolCall("call_1", "get_weather", "{}")
    calling = ChatMessage("assistant", "", tool_calls=(call,))
    closed = prompt_text(vocabulary, GenerationRequest(messages=(QUESTION, calling)), "demo")
    assert closed.endswith("</tool_call><|im_end|>\n<|im_start|>assistant\n")


def test_template_variables_reach_the_template(vocabulary: TextOnly) -> None:
    effortful = TextOnly(vocabulary)
    effortful.chat_template = "{{ messages[0].content }} effort={{ reasoning_effort }}"

    request = GenerationRequest(
        messages=(QUESTION,), template_variables=(("reasoning_effort", "high"),)
    )
    assert prompt_text(effortful, request, "demo") == "Tell me about dragons. effort=high"


@pytest.mark.slow
def test_the_count_is_the_prompt_the_worker_prefills() -> None:
    request = GenerationRequest(
        messages=(ChatMessage("system", "Be brief."), QUESTION), max_tokens=1, mtp_depth=0
    )
    counter = PromptCounter("llama.cpp", demo_model_path())
    try:
        counted = counter.count(request)
    finally:
        counter.close()
    with RuntimeClient(demo_model_path()) as client:
        assert client.generate(request).prompt_token_count == counted
    vocabulary = VocabularyOnly(demo_model_path())
    try:
        assert len(prompt_token_ids(TextOnly(vocabulary), request, "demo")) == counted
    finally:
        vocabulary.close()
