"""Leaving out a conversation's oldest turns when it outgrows the context: whole turns, oldest
first, the system prompt and the last message kept, and only when the request allows it."""

from __future__ import annotations

from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.request import GenerationRequest
from app.engine.runtime.speculative.history_fit import fit_history, left_out_note


def _conversation() -> tuple[ChatMessage, ...]:
    return (
        ChatMessage("system", "Be brief."),
        ChatMessage("user", "first question " * 10),
        ChatMessage("assistant", "first answer " * 10),
        ChatMessage("user", "second question " * 10),
        ChatMessage("assistant", "second answer " * 10),
        ChatMessage("user", "third question"),
    )


def _words(request: GenerationRequest) -> int:
    """A prompt's size in words: what the context holds, for this test's purpose."""
    return sum(len(message.content.split()) for message in request.messages)


def test_the_oldest_whole_turns_go_first_and_the_system_prompt_stays() -> None:
    request = GenerationRequest(messages=_conversation(), max_tokens=8, trim_history=True)
    fitted, dropped = fit_history(request, _words, context=56)  # the reply keeps 8
    assert dropped == 2
    assert fitted.messages[0].content == "Be brief."
    assert [m.role for m in fitted.messages] == ["system", "user", "assistant", "user"]
    assert fitted.messages[1].content.startswith("second question")
    assert _words(fitted) <= 56 - 8


def test_the_last_message_stays_even_when_nothing_else_fits() -> None:
    request = GenerationRequest(messages=_conversation(), max_tokens=8, trim_history=True)
    fitted, dropped = fit_history(request, _words, context=6)
    assert [m.content for m in fitted.messages] == ["Be brief.", "third question"]
    assert dropped == 4


def test_nothing_is_left_out_unless_the_request_allows_it_or_it_fits() -> None:
    request = GenerationRequest(messages=_conversation(), max_tokens=8)
    assert fit_history(request, _words, context=48) == (request, 0)
    allowed = GenerationRequest(messages=_conversation(), max_tokens=8, trim_history=True)
    assert fit_history(allowed, _words, context=4096) == (allowed, 0)


def test_the_note_says_how_many_were_left_out() -> None:
    assert left_out_note(2, 4096) == (
        "The 2 oldest messages were left out: the conversation no longer fits the "
        "4,096-token context."
    )
