"""Checks of the honoured fields that shape a conversation: the Responses API's input,
instructions and kept responses, Anthropic's messages and system prompt, and what
count_tokens counts — and :func:`check_for`, every honoured field's check."""

from __future__ import annotations

from typing import Any

import httpx2

from tests.server.field_checks import COUNT_TOKENS, MESSAGES, USER, Endpoint
from tests.server.honoured_checks import (
    ANTHROPIC_TOOLS,
    SHARED,
    SPECIFIC,
    Check,
    continued,
    prompt_tokens,
    refused,
)
from tests.server.reply_shape_checks import REPLY_SHAPE
from tests.server.server_process import ServerProcess

BRIEF = "Answer in one word."


def _input(endpoint: Endpoint, server: ServerProcess) -> None:
    as_text = endpoint.reply(server)
    as_items = endpoint.reply(server, input=[{"type": "message", **USER[0]}])
    assert endpoint.text(as_items) == endpoint.text(as_text)
    assert prompt_tokens(endpoint, as_items) == prompt_tokens(endpoint, as_text)
    called = [
        *USER,
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "Sunny, 21 degrees."},
        {"type": "reasoning", "id": "rs_1", "summary": []},
    ]
    after_call = endpoint.reply(server, input=called)
    assert prompt_tokens(endpoint, after_call) > prompt_tokens(endpoint, as_text)
    server.wait_for_line(r"passed over: reasoning item at input\[3\]")
    continued(endpoint, server)


def _instructions(endpoint: Endpoint, server: ServerProcess) -> None:
    instructed = endpoint.reply(server, instructions=BRIEF)
    as_system = endpoint.reply(server, input=[{"role": "system", "content": BRIEF}, *USER])
    assert endpoint.text(instructed) == endpoint.text(as_system)
    assert prompt_tokens(endpoint, instructed) == prompt_tokens(endpoint, as_system)
    assert prompt_tokens(endpoint, instructed) > prompt_tokens(endpoint, endpoint.reply(server))


def _previous_response_id(endpoint: Endpoint, server: ServerProcess) -> None:
    first = endpoint.reply(server, instructions=BRIEF)
    follow = {"input": "And then?", "previous_response_id": first["id"]}
    second = endpoint.reply(server, **follow)
    whole = [*USER, {"role": "assistant", "content": endpoint.text(first)}]
    resent = endpoint.reply(server, input=[*whole, {"role": "user", "content": "And then?"}])
    assert endpoint.text(second) == endpoint.text(resent), "instructions are not carried over"
    assert prompt_tokens(endpoint, second) == prompt_tokens(endpoint, resent)
    third = endpoint.reply(server, input="Why?", previous_response_id=second["id"])
    assert prompt_tokens(endpoint, third) > prompt_tokens(endpoint, second)
    message = refused(endpoint, server, "previous_response_id", previous_response_id="resp_gone")
    assert "is not kept" in message


def _store(endpoint: Endpoint, server: ServerProcess) -> None:
    kept = endpoint.reply(server)
    fetched = httpx2.get(f"{server.root_url}/v1/responses/{kept['id']}", timeout=30)
    assert fetched.status_code == 200 and fetched.json()["output"] == kept["output"]
    unkept = endpoint.reply(server, store=False)
    assert unkept["store"] is False
    gone = httpx2.get(f"{server.root_url}/v1/responses/{unkept['id']}", timeout=30)
    assert gone.status_code == 404
    refused(endpoint, server, "previous_response_id", previous_response_id=unkept["id"])
    deleted = httpx2.delete(f"{server.root_url}/v1/responses/{kept['id']}", timeout=30)
    assert deleted.json() == {"id": kept["id"], "object": "response", "deleted": True}
    assert httpx2.get(f"{server.root_url}/v1/responses/{kept['id']}").status_code == 404


def _metadata(endpoint: Endpoint, server: ServerProcess) -> None:
    tags = {"ticket": "T-42", "team": "search"}
    assert endpoint.reply(server, metadata=tags)["metadata"] == tags


def _include(endpoint: Endpoint, server: ServerProcess) -> None:
    plain = endpoint.say(server)
    assert endpoint.say(server, include=["reasoning.encrypted_content"]) == plain
    reply = endpoint.reply(server, include=["message.output_text.logprobs"])
    part = reply["output"][0]["content"][0]
    assert "".join(entry["token"] for entry in part["logprobs"]) == part["text"] == plain
    assert endpoint.reply(server)["output"][0]["content"][0]["logprobs"] == []
    refused(endpoint, server, "include", include=["file_search_call.results"])


def _truncation(endpoint: Endpoint, server: ServerProcess) -> None:
    """Six long turns outgrow the demo server's 4,096-token context: refused, unless the oldest
    may be left out."""
    long_turns = [
        {"role": role, "content": f"{index}: " + "word " * 700}
        for index in range(6)
        for role in ("user", "assistant")
    ]
    too_long = [*long_turns, *USER]
    assert "maximum context length" in refused(endpoint, server, "input", input=too_long)
    trimmed = endpoint.reply(server, input=too_long, truncation="auto")
    assert trimmed["truncation"] == "auto" and endpoint.text(trimmed)
    assert 0 < prompt_tokens(endpoint, trimmed) < 4096 - 12
    refused(endpoint, server, "truncation", truncation="sometimes")


def _messages(endpoint: Endpoint, server: ServerProcess) -> None:
    continued(endpoint, server)
    thought = [
        *USER,
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "They want dragons.", "signature": "x"},
                {"type": "text", "text": "Dragons are large."},
            ],
        },
        {"role": "system", "content": "Be brief from now on."},
        {"role": "user", "content": [{"type": "text", "text": "More?"}]},
    ]
    plain = [*thought[:1], {"role": "assistant", "content": "Dragons are large."}, *thought[2:]]
    assert endpoint.say(server, messages=thought) == endpoint.say(server, messages=plain)
    server.wait_for_line(r"passed over: thinking block at messages\[1\]\.content\[0\]")


def _system(endpoint: Endpoint, server: ServerProcess) -> None:
    def tokens(**fields: Any) -> int:
        if endpoint is COUNT_TOKENS:
            return endpoint.reply(server, **fields)["input_tokens"]
        return prompt_tokens(endpoint, endpoint.reply(server, **fields))

    assert tokens(system=BRIEF) == tokens(system=[{"type": "text", "text": BRIEF}])
    assert tokens(system=BRIEF) > tokens()


def _counted_messages(endpoint: Endpoint, server: ServerProcess) -> None:
    for messages in (USER, [*USER, {"role": "assistant", "content": "Dragons"}]):
        counted = endpoint.reply(server, messages=messages)["input_tokens"]
        used = prompt_tokens(MESSAGES, MESSAGES.reply(server, messages=messages, max_tokens=1))
        assert counted == used


def _counted_tools(endpoint: Endpoint, server: ServerProcess) -> None:
    plain = endpoint.reply(server)["input_tokens"]
    offered = endpoint.reply(server, tools=ANTHROPIC_TOOLS)["input_tokens"]
    used = MESSAGES.reply(server, tools=ANTHROPIC_TOOLS, max_tokens=1)
    assert offered == prompt_tokens(MESSAGES, used) > plain


def _counted_tool_choice(endpoint: Endpoint, server: ServerProcess) -> None:
    plain = endpoint.reply(server)["input_tokens"]
    hidden = endpoint.reply(server, tools=ANTHROPIC_TOOLS, tool_choice={"type": "none"})
    assert hidden["input_tokens"] == plain


CONVERSATION: dict[tuple[str, str], Check] = {
    ("responses", "input"): _input,
    ("responses", "instructions"): _instructions,
    ("responses", "previous_response_id"): _previous_response_id,
    ("responses", "store"): _store,
    ("responses", "metadata"): _metadata,
    ("responses", "include"): _include,
    ("responses", "truncation"): _truncation,
    ("messages", "messages"): _messages,
    ("messages", "system"): _system,
    ("count_tokens", "messages"): _counted_messages,
    ("count_tokens", "system"): _system,
    ("count_tokens", "tools"): _counted_tools,
    ("count_tokens", "tool_choice"): _counted_tool_choice,
    ("count_tokens", "model"): SHARED["model"],
}


def check_for(endpoint: Endpoint, name: str) -> Check | None:
    """The check of ``endpoint``'s honoured field ``name`` (None when it has none)."""
    own = (
        SPECIFIC.get((endpoint.key, name))
        or CONVERSATION.get((endpoint.key, name))
        or REPLY_SHAPE.get((endpoint.key, name))
    )
    if own is not None or endpoint is COUNT_TOKENS:
        return own
    return SHARED.get(name)
