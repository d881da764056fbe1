"""Anthropic ``messages`` → the runtime's chat turns, tool turns included.

A message's ``content`` is a string or a list of blocks. ``text`` blocks are joined; an assistant
turn's ``tool_use`` blocks become its tool calls; a user turn's ``tool_result`` blocks each become
a ``tool`` turn answering the call they name (a result marked ``is_error`` says so), with the
user's own text, if any, as a user turn after them. ``image`` blocks (a ``base64`` source, or a
``url`` one under the same rules as OpenAI's image URLs, :mod:`app.engine.server.core.images`)
stand where they are in a user turn's text or a tool result's. A ``system`` turn inside the
conversation (Claude Code sends them) stays a system turn where it is. ``thinking`` and
``redacted_thinking`` blocks (an earlier reply's reasoning, which Anthropic's API also leaves out
of the prompt) and ``document`` blocks are passed over, each named in the request's log line.
Other blocks this server cannot read are refused with a 400 naming the block.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app.engine.runtime import ToolCall
from app.engine.runtime.chat_format.images import ImagePart
from app.engine.runtime.chat_format.prompting import ChatMessage, PlacedImage
from app.engine.server.core.api_errors import bad_request
from app.engine.server.core.echo import echo
from app.engine.server.core.images import RequestImages

ANTHROPIC_ROLES = ("user", "assistant", "system")
TEXT_BLOCK, TOOL_USE_BLOCK, TOOL_RESULT_BLOCK, IMAGE_BLOCK = (
    "text",
    "tool_use",
    "tool_result",
    "image",
)
PASSED_OVER_BLOCKS = ("thinking", "redacted_thinking", "document")
ERROR_RESULT_PREFIX = "Error: "


@dataclass(frozen=True)
class Conversation:
    turns: tuple[ChatMessage, ...]
    passed_over: tuple[str, ...]
    """Blocks left out of the prompt, as ``thinking block at messages[1].content[0]``."""


def conversation_turns(raw_messages: list[Any], images: RequestImages) -> Conversation:
    """The turns of ``messages``, each ``tool_result`` matched to the ``tool_use`` it answers."""
    turns: list[ChatMessage] = []
    called: dict[str, str] = {}  # tool_use id → tool name
    passed_over: list[str] = []
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
        if isinstance(content, list):
            content = _kept_blocks(content, f"{where}.content", passed_over)
        if isinstance(content, str):
            turns.append(ChatMessage(role, content))
        elif isinstance(content, list) and role == "system":
            turns.append(ChatMessage(role, text_of_blocks(content, where, separator="\n\n")))
        elif isinstance(content, list):
            if role == "assistant":
                turns.extend(_assistant_blocks(content, f"{where}.content", called))
            else:
                turns.extend(_user_blocks(content, f"{where}.content", called, images))
        else:
            raise bad_request(
                f"'{where}.content' must be a string or a list of content blocks",
                f"{where}.content",
            )
    return Conversation(tuple(turns), tuple(passed_over))


def _kept_blocks(blocks: list[Any], where: str, passed_over: list[str]) -> list[Any]:
    """``blocks`` without those the prompt leaves out, each named in ``passed_over``."""
    kept = []
    for number, block in enumerate(blocks):
        kind = _kind(block)
        if kind in PASSED_OVER_BLOCKS:
            passed_over.append(f"{kind} block at {where}[{number}]")
        else:
            kept.append(block)
    return kept


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


def _user_blocks(
    blocks: list[Any], where: str, called: dict[str, str], images: RequestImages
) -> list[ChatMessage]:
    results: list[ChatMessage] = []
    own: list[Any] = []
    for number, block in enumerate(blocks):
        here = f"{where}[{number}]"
        if _kind(block) == TOOL_RESULT_BLOCK:
            results.append(_tool_result(block, here, called, images))
        else:
            own.append((block, here))
    if own or not results:
        text, placed = _text_and_images(own, images, also=TOOL_RESULT_BLOCK)
        results.append(ChatMessage("user", text, images=placed))
    return results


def _text_and_images(
    blocks: list[tuple[Any, str]], images: RequestImages, *, also: str, separator: str = ""
) -> tuple[str, tuple[PlacedImage, ...]]:
    """Text blocks joined by ``separator``, with image blocks at their places."""
    texts: list[str] = []
    placed: list[PlacedImage] = []
    length = 0
    for block, here in blocks:
        if _kind(block) == IMAGE_BLOCK:
            placed.append(PlacedImage(length, _image(block, here, images)))
            continue
        text = _text(block, here, also=f"{IMAGE_BLOCK} and {also}")
        if texts:
            length += len(separator)
        texts.append(text)
        length += len(text)
    return separator.join(texts), tuple(placed)


def _image(block: dict[str, Any], where: str, images: RequestImages) -> ImagePart:
    source = block.get("source")
    kind = source.get("type") if isinstance(source, dict) else None
    if kind == "base64":
        return images.from_base64(source.get("data"), source.get("media_type"), f"{where}.source")
    if kind == "url":
        return images.from_url(source.get("url"), f"{where}.source.url")
    raise bad_request(
        f'\'{where}.source\' must be {{"type": "base64", "media_type": ..., "data": ...}} '
        f'or {{"type": "url", "url": ...}}, got a source of type {echo(kind)}',
        f"{where}.source",
    )


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


def _tool_result(
    block: dict[str, Any], where: str, called: dict[str, str], images: RequestImages
) -> ChatMessage:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str) or call_id not in called:
        raise bad_request(
            f"'{where}.tool_use_id' {echo(call_id)} answers no tool_use block of an earlier "
            "assistant turn; send the id of the call this result answers",
            f"{where}.tool_use_id",
        )
    content, placed = block.get("content", ""), ()
    if isinstance(content, list):
        numbered = [(item, f"{where}.content[{n}]") for n, item in enumerate(content)]
        content, placed = _text_and_images(numbered, images, also="text", separator="\n")
    if not isinstance(content, str):
        raise bad_request(
            f"'{where}.content' must be a string or a list of text and image blocks",
            f"{where}.content",
        )
    prefix = ERROR_RESULT_PREFIX if block.get("is_error") is True else ""
    return ChatMessage(
        "tool",
        prefix + content,
        tool_call_id=call_id,
        name=called[call_id],
        images=tuple(PlacedImage(p.offset + len(prefix), p.image) for p in placed),
    )
