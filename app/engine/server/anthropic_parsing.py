"""Anthropic Messages request bodies → the same :class:`ParsedRequest` the OpenAI path makes.

``POST /v1/messages`` takes ``messages`` (user/assistant turns whose ``content`` is a string or
a list of blocks), ``system`` (a string or text blocks), ``max_tokens``, ``stop_sequences``,
``temperature``/``top_p``/``top_k``, ``stream`` and the ``mtp_depth`` extension. Both APIs end in
one :class:`ParsedRequest`, so whatever is added to the generation (tools, structured output)
serves both. Block types this server cannot run yet (images, documents, tool use) are refused
with a 400 naming the block, never dropped. ``model`` may name any model: the one served answers.
"""

from __future__ import annotations

from typing import Any

from app.engine.runtime.prompting import ChatMessage
from app.engine.server.api_errors import bad_request, unsupported
from app.engine.server.echo import echo
from app.engine.server.parsing import (
    ParsedRequest,
    RequestDefaults,
    generation_fields,
    json_object,
    model_name,
    stop_strings,
)

ANTHROPIC_ROLES = ("user", "assistant")
TEXT_BLOCK = "text"


def parse_messages_body(body: Any, defaults: RequestDefaults) -> ParsedRequest:
    body = json_object(body)
    _refuse_tools(body)
    messages = _conversation(body)
    return ParsedRequest(
        model=model_name(body),
        generation=generation_fields(body, {"messages": messages}, defaults, "max_tokens"),
        stop=stop_strings(body, "stop_sequences"),
        stream=bool(body.get("stream", False)),
        include_usage_chunk=False,
    )


def parse_count_tokens_body(body: Any) -> tuple[ChatMessage, ...]:
    """The conversation ``/v1/messages/count_tokens`` measures (the same fields as a message)."""
    body = json_object(body)
    _refuse_tools(body)
    return _conversation(body)


def _refuse_tools(body: dict[str, Any]) -> None:
    for name in ("tools", "tool_choice"):
        if body.get(name):
            raise unsupported(name, body[name], "this server does not run tools yet")


def _conversation(body: dict[str, Any]) -> tuple[ChatMessage, ...]:
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise bad_request("'messages' must be a non-empty array of messages", "messages")
    system = _system(body.get("system"))
    turns = tuple(_message(item, index) for index, item in enumerate(raw_messages))
    return ((ChatMessage("system", system),) if system else ()) + turns


def _system(value: Any) -> str:
    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, list):
        return _text_of_blocks(value, "system", separator="\n\n")
    raise bad_request(f"'system' must be a string or a list of text blocks, got {echo(value)}")


def _message(item: Any, index: int) -> ChatMessage:
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
        content = _text_of_blocks(content, f"{where}.content", separator="")
    if not isinstance(content, str):
        raise bad_request(
            f"'{where}.content' must be a string or a list of content blocks", f"{where}.content"
        )
    return ChatMessage(role, content)


def _text_of_blocks(blocks: list[Any], where: str, *, separator: str) -> str:
    texts: list[str] = []
    for number, block in enumerate(blocks):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind != TEXT_BLOCK:
            raise bad_request(
                f"'{where}[{number}]' is a block of type {echo(kind)}: this server reads only text "
                "blocks ({'type': 'text', 'text': ...})",
                f"{where}[{number}]",
            )
        text = block.get("text")
        if not isinstance(text, str):
            raise bad_request(f"'{where}[{number}].text' must be a string", f"{where}[{number}]")
        texts.append(text)
    return separator.join(texts)
