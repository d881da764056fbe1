"""Anthropic ``messages`` → the runtime's chat turns, tool turns included.

A message's ``content`` is a string or a list of blocks. ``text`` blocks are joined; an assistant
turn's ``tool_use`` blocks become its tool calls; a user turn's ``tool_result`` blocks each become
a ``tool`` turn answering the call they name (a result marked ``is_error`` says so), with the
user's own text, if any, as a user turn after them. Blocks this server cannot run (images,
documents, …) are refused with a 400 naming the block, never dropped.
"""

from __future__ import annotations

import json
from typing import Any

from app.engine.runtime import ToolCall
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.server.core.api_errors import bad_request
from app.engine.server.core.echo import echo

ANTHROPIC_ROLES = ("user", "assistant")
TEXT_BLOCK, TOOL_USE_BLOCK, TOOL_RESULT_BLOCK = "text", "tool_use", "tool_result"
ERROR_RESULT_PREFIX = "Error: "


def conversation_turns(raw_messages: list[Any]) -> tuple[ChatMessage, ...]:
    """The turns of ``messages``, each ``tool_result`` matched to the ``tool_use`` it answers."""
    turns: list[ChatMessage] = []
    called: dict[str, str] = {}  # tool_use id → tool name
    for index, item in enumerate(raw_messages):
        where = f"messages[{index}]"
        if not isinstance(item, dict):
            raise bad_request(f"'{where}' must be an object with 'role' and 'content'", where)
        role = item.get("role")
        if role not in ANTHROPIC_ROLES:
            raise bad_request(
                f"'{where}.role' is {echo(role)}: use one of {', '.join(ANTHROPIC_ROLES)} (the "
                "system prompt goes in the top-level 'system' field)",
                f"{where}.role",
            )
        content = item.get("content")
        if isinstance(content, str):
            turns.append(ChatMessage(role, content))
        elif isinstance(content, list):
            read = _assistant_blocks if role == "assistant" else _user_blocks
            turns.extend(read(content, f"{where}.content", called))
        else:
            raise bad_request(
                f"'{where}.content' must be a string or a list of content blocks",
                f"{where}.content",
            )
    return tuple(turns)


def text_of_blocks(blocks: list[Any], where: str, *, separator: str) -> str:
    """The text of a list of ``text`` blocks; any other block is a 400."""
    return separator.join(_text(block, f"{where}[{number}]") for number, block in enumerate(blocks))


def _assistant_blocks(blocks: list[Any], where: str, called: dict[str, str]) -> list[ChatMessage]:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for number, block in enumerate(blocks):
        here = f"{where}[{number}]"
        if _kind(block) == TOOL_USE_BLOCK:
            call = _tool_use(block, here)
            called[call.id] = call.name
            calls.append(call)
        else:
            texts.append(_text(block, here, also=TOOL_USE_BLOCK))
    return [ChatMessage("assistant", "".join(texts), tool_calls=tuple(calls))]


def _user_blocks(blocks: list[Any], where: str, called: dict[str, str]) -> list[ChatMessage]:
    results: list[ChatMessage] = []
    texts: list[str] = []
    for number, block in enumerate(blocks):
        here = f"{where}[{number}]"
        if _kind(block) == TOOL_RESULT_BLOCK:
            results.append(_tool_result(block, here, called))
        else:
            texts.append(_text(block, here, also=TOOL_RESULT_BLOCK))
    if texts or not results:
        results.append(ChatMessage("user", "".join(texts)))
    return results


def _kind(block: Any) -> Any:
    return block.get("type") if isinstance(block, dict) else None


def _text(block: Any, where: str, *, also: str | None = None) -> str:
    if _kind(block) != TEXT_BLOCK:
        readable = "text blocks ({'type': 'text', 'text': ...})"
        if also:
            readable = f"text and {also} blocks"
        raise bad_request(
            f"'{where}' is a block of type {echo(_kind(block))}: this server reads only {readable}",
            where,
        )
    text = block.get("text")
    if not isinstance(text, str):
        raise bad_request(f"'{where}.text' must be a string", where)
    return text


def _tool_use(block: dict[str, Any], where: str) -> ToolCall:
    call_id, name, arguments = block.get("id"), block.get("name"), block.get("input", {})
    if not isinstance(call_id, str) or not isinstance(name, str) or not isinstance(arguments, dict):
        raise bad_request(
            f'\'{where}\' must be {{"type": "tool_use", "id": ..., "name": ..., "input": {{...}}}}',
            where,
        )
    return ToolCall(call_id, name, json.dumps(arguments))


def _tool_result(block: dict[str, Any], where: str, called: dict[str, str]) -> ChatMessage:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str) or call_id not in called:
        raise bad_request(
            f"'{where}.tool_use_id' {echo(call_id)} answers no tool_use block of an earlier "
            "assistant turn; send the id of the call this result answers",
            f"{where}.tool_use_id",
        )
    content = block.get("content", "")
    if isinstance(content, list):
        content = text_of_blocks(content, f"{where}.content", separator="\n")
    if not isinstance(content, str):
        raise bad_request(
            f"'{where}.content' must be a string or a list of text blocks", f"{where}.content"
        )
    if block.get("is_error") is True:
        content = ERROR_RESULT_PREFIX + content
    return ChatMessage("tool", content, tool_call_id=call_id, name=called[call_id])
