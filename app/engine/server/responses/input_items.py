"""The Responses API's ``input`` → the runtime's chat turns.

``input`` is a string (one user message) or a list of items: messages (``role`` user, system,
developer or assistant; ``content`` a string or ``input_text``/``output_text`` parts), an
earlier reply's ``function_call``\\ s (joined to the assistant turn before them) and the
``function_call_output``\\ s that answer them (tool turns). ``reasoning`` items — an earlier
reply's reasoning, which the model does not need back — are passed over, each named in the
request's log line. Any other item or part is a 400 naming it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.chat_format.tools import ToolCall
from app.engine.server.core.api_errors import bad_request
from app.engine.server.core.echo import echo

ROLES = {"user": "user", "system": "system", "developer": "system", "assistant": "assistant"}
TEXT_PARTS = ("input_text", "output_text", "text")
PASSED_OVER_ITEMS = ("reasoning",)


@dataclass
class InputTurns:
    """The turns read so far, the calls they made (call id → function name), and what was
    passed over."""

    turns: list[ChatMessage] = field(default_factory=list)
    called: dict[str, str] = field(default_factory=dict)
    passed_over: list[str] = field(default_factory=list)


def input_turns(value: Any, called: dict[str, str]) -> InputTurns:
    """The turns of ``input``; ``called``: the calls made earlier in the conversation (from
    ``previous_response_id``), which its outputs may answer."""
    read = InputTurns(called=dict(called))
    if isinstance(value, str):
        read.turns.append(ChatMessage("user", value))
        return read
    if not isinstance(value, list) or not value:
        raise bad_request("'input' must be a string or a non-empty array of items", "input")
    for index, item in enumerate(value):
        _item(item, f"input[{index}]", read)
    return read


def _item(item: Any, where: str, read: InputTurns) -> None:
    if not isinstance(item, dict):
        raise bad_request(f"'{where}' must be an object", where)
    kind = item.get("type", "message")
    if kind == "message":
        read.turns.append(_message(item, where))
    elif kind == "function_call":
        _function_call(item, where, read)
    elif kind == "function_call_output":
        read.turns.append(_call_output(item, where, read.called))
    elif kind in PASSED_OVER_ITEMS:
        read.passed_over.append(f"{kind} item at {where}")
    else:
        raise bad_request(
            f"'{where}' is an item of type {echo(kind)}: this server reads messages, "
            "function_call and function_call_output items (and passes over reasoning)",
            f"{where}.type",
        )


def _message(item: dict[str, Any], where: str) -> ChatMessage:
    role = item.get("role")
    if role not in ROLES:
        raise bad_request(
            f"'{where}.role' is {echo(role)}: use one of {', '.join(ROLES)}", f"{where}.role"
        )
    return ChatMessage(ROLES[role], _text(item.get("content"), f"{where}.content"))


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad_request(f"'{where}' must be a string or an array of text parts", where)
    texts = []
    for number, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "refusal" and isinstance(part.get("refusal"), str):
            texts.append(part["refusal"])
        elif kind in TEXT_PARTS and isinstance(part.get("text"), str):
            texts.append(part["text"])
        else:
            raise bad_request(
                f"'{where}[{number}]' is a part of type {echo(kind)}: this server reads "
                "input_text and output_text parts",
                f"{where}[{number}]",
            )
    return "".join(texts)


def _function_call(item: dict[str, Any], where: str, read: InputTurns) -> None:
    call_id, name, arguments = item.get("call_id"), item.get("name"), item.get("arguments")
    if not all(isinstance(value, str) for value in (call_id, name, arguments)):
        raise bad_request(
            f"'{where}' must be a function_call with string 'call_id', 'name' and 'arguments'",
            where,
        )
    call = ToolCall(call_id, name, _json_text(arguments))
    read.called[call_id] = name
    last = read.turns[-1] if read.turns else None
    if last is not None and last.role == "assistant":
        read.turns[-1] = ChatMessage("assistant", last.content, (*last.tool_calls, call))
    else:
        read.turns.append(ChatMessage("assistant", "", (call,)))


def _call_output(item: dict[str, Any], where: str, called: dict[str, str]) -> ChatMessage:
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or call_id not in called:
        raise bad_request(
            f"'{where}.call_id' {echo(call_id)} answers no function_call before it; send the "
            "call_id of the call this output answers",
            f"{where}.call_id",
        )
    output = _text(item.get("output"), f"{where}.output")
    return ChatMessage("tool", output, tool_call_id=call_id, name=called[call_id])


def _json_text(arguments: str) -> str:
    """Arguments as the model's template wants them back: JSON where they are JSON."""
    try:
        return json.dumps(json.loads(arguments))
    except ValueError:
        return arguments
