"""Anthropic Messages request bodies → the same :class:`ParsedRequest` the OpenAI path makes.

``POST /v1/messages`` takes ``messages`` (user/assistant turns whose ``content`` is a string or a
list of blocks), ``system`` (a string or text blocks), ``max_tokens``, ``stop_sequences``,
``temperature``/``top_p``/``top_k``, ``stream``, ``tools``/``tool_choice``
(:mod:`~app.engine.server.anthropic.tools`) and the ``mtp_depth`` extension; content blocks, tool
turns included, are read by :mod:`~app.engine.server.anthropic.content`. Both APIs end in one
:class:`ParsedRequest`, so whatever the generation can do serves both. ``model`` may name any model:
the one served answers.
"""

from __future__ import annotations

from typing import Any

from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.server.anthropic.content import conversation_turns, text_of_blocks
from app.engine.server.anthropic.tools import tool_fields
from app.engine.server.core.api_errors import bad_request
from app.engine.server.core.echo import echo
from app.engine.server.core.images import RequestImages
from app.engine.server.core.request_fields import (
    ParsedRequest,
    RequestDefaults,
    generation_fields,
    json_object,
    model_name,
    stop_strings,
)


def parse_messages_body(
    body: Any, defaults: RequestDefaults, images: RequestImages
) -> ParsedRequest:
    body = json_object(body)
    source = {"messages": _conversation(body, images), **tool_fields(body)}
    return ParsedRequest(
        model=model_name(body),
        generation=generation_fields(body, source, defaults, "max_tokens"),
        stop=stop_strings(body, "stop_sequences"),
        stream=bool(body.get("stream", False)),
        include_usage_chunk=False,
    )


def parse_count_tokens_body(body: Any, images: RequestImages) -> dict[str, Any]:
    """The :class:`GenerationRequest` fields of the conversation ``/v1/messages/count_tokens``
    measures (the same fields as a message: system, messages, tools)."""
    body = json_object(body)
    return {"messages": _conversation(body, images), **tool_fields(body)}


def _conversation(body: dict[str, Any], images: RequestImages) -> tuple[ChatMessage, ...]:
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise bad_request("'messages' must be a non-empty array of messages", "messages")
    system = _system(body.get("system"))
    turns = conversation_turns(raw_messages, images)
    return ((ChatMessage("system", system),) if system else ()) + turns


def _system(value: Any) -> str:
    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, list):
        return text_of_blocks(value, "system", separator="\n\n")
    raise bad_request(f"'system' must be a string or a list of text blocks, got {echo(value)}")
