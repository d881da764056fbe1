"""Anthropic Messages request bodies → the same :class:`ParsedRequest` the OpenAI path makes.

``POST /v1/messages`` takes ``messages`` (user/assistant turns whose ``content`` is a string or a
list of blocks), ``system`` (a string or text blocks), ``max_tokens``, ``stop_sequences``,
``temperature``/``top_p``/``top_k``, ``stream``, ``tools``/``tool_choice``
(:mod:`~app.engine.server.anthropic.tools`), ``output_config.format`` and the ``mtp_depth``
extension; content blocks, tool turns included, are read by
:mod:`~app.engine.server.anthropic.content`. Every field is checked against its table
(:mod:`~app.engine.server.anthropic.field_table`). Both APIs end in one
:class:`ParsedRequest`, so whatever the generation can do serves both. ``model`` may name any model:
the one served answers.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.chat_format.constraint import json_schema_constraint
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.server.anthropic.content import Conversation, conversation_turns, text_of_blocks
from app.engine.server.anthropic.field_table import COUNT_TOKENS_FIELDS, MESSAGES_FIELDS
from app.engine.server.anthropic.tools import tool_fields
from app.engine.server.core.api_errors import bad_request
from app.engine.server.core.echo import echo
from app.engine.server.core.field_rules import check_fields
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
    check_fields(body, MESSAGES_FIELDS, "a Messages request")
    conversation = _conversation(body, images)
    tools = tool_fields(body)
    forced = "tool_choice" in tools and tools["tool_choice"].forces_call
    output = _output_format(body)
    if forced:  # the reply is the call and no text: the format has nothing to hold
        output = {}
    source = {"messages": conversation.turns, **tools, **output}
    return ParsedRequest(
        model=model_name(body),
        generation=generation_fields(body, source, defaults, "max_tokens"),
        stop=stop_strings(body, "stop_sequences"),
        stream=bool(body.get("stream", False)),
        include_usage_chunk=False,
        passed_over=conversation.passed_over,
    )


def parse_count_tokens_body(body: Any, images: RequestImages) -> dict[str, Any]:
    """The :class:`GenerationRequest` fields of the conversation ``/v1/messages/count_tokens``
    measures (the same fields as a message: system, messages, tools)."""
    body = json_object(body)
    check_fields(body, COUNT_TOKENS_FIELDS, "a count_tokens request")
    return {"messages": _conversation(body, images).turns, **tool_fields(body)}


def _conversation(body: dict[str, Any], images: RequestImages) -> Conversation:
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise bad_request("'messages' must be a non-empty array of messages", "messages")
    system = _system(body.get("system"))
    conversation = conversation_turns(raw_messages, images)
    if not system:
        return conversation
    return dataclasses.replace(
        conversation, turns=(ChatMessage("system", system), *conversation.turns)
    )


def _system(value: Any) -> str:
    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, list):
        return text_of_blocks(value, "system", separator="\n\n")
    raise bad_request(f"'system' must be a string or a list of text blocks, got {echo(value)}")


def _output_format(body: dict[str, Any]) -> dict[str, Any]:
    """``output_config.format`` as the reply's constraint (its ``effort`` is ignored: see the
    field table)."""
    config = body.get("output_config")
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise bad_request("'output_config' must be an object", "output_config")
    output_format = config.get("format")
    if output_format is None:
        return {}
    schema = output_format.get("schema") if isinstance(output_format, dict) else None
    if output_format.get("type") != "json_schema" or not isinstance(schema, dict):
        raise bad_request(
            '\'output_config.format\' must be {"type": "json_schema", "schema": {...}}',
            "output_config.format",
        )
    try:
        return {"constraint": json_schema_constraint(schema, "'output_config.format'")}
    except RuntimeBackendError as exc:
        raise bad_request(str(exc), "output_config.format") from None
