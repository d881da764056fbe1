"""OpenAI request bodies (chat and text completions) → a :class:`ParsedRequest`, with 400s.

The fields both APIs share (length, sampling, seed, ``mtp_depth``, stop strings) are read by
:mod:`app.engine.server.core.request_fields`; this module reads OpenAI's own: ``messages`` or
``prompt``, ``stream_options``, ``parallel_tool_calls``, ``reasoning_effort``, ``echo``, the tool
fields (:mod:`.tool_fields`). A user message's content may be a list of ``text`` and
``image_url`` parts (:mod:`app.engine.server.core.images`; an image's ``detail`` hint is not
used: the projector sizes every image itself). Every field is checked against its table
(:mod:`.field_table`): the ones this server cannot honour are refused with a 400 naming them,
never silently ignored.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from app.engine.runtime.chat_format.prompting import ChatMessage, PlacedImage
from app.engine.server.core.api_errors import bad_request
from app.engine.server.core.echo import echo
from app.engine.server.core.field_rules import check_fields
from app.engine.server.core.images import RequestImages, image_url_of
from app.engine.server.core.request_fields import (
    REASONING_EFFORT,
    ParsedRequest,
    RequestDefaults,
    generation_fields,
    json_object,
    model_name,
    one_call_unless_parallel,
    reasoning_effort,
    stop_strings,
)
from app.engine.server.openai.choice_fields import with_choice_fields
from app.engine.server.openai.field_table import CHAT_FIELDS, COMPLETION_FIELDS
from app.engine.server.openai.tool_fields import is_tool_turn, request_fields, tool_turn

CHAT_ROLES = ("system", "developer", "user", "assistant")
ROLE_ALIASES = {"developer": "system"}  # OpenAI's newer name for the system turn


def parse_chat_body(body: Any, defaults: RequestDefaults, images: RequestImages) -> ParsedRequest:
    body = json_object(body)
    check_fields(body, CHAT_FIELDS, "a chat completion request")
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise bad_request("'messages' must be a non-empty array of messages", "messages")
    messages = tuple(_message(item, index, images) for index, item in enumerate(raw_messages))
    source: dict[str, Any] = {"messages": messages, **request_fields(body)}
    effort = reasoning_effort(body.get("reasoning_effort"), "reasoning_effort")
    if effort is not None:
        source["template_variables"] = ((REASONING_EFFORT, effort),)
    parsed = with_choice_fields(body, _parsed(body, source, defaults), chat=True)
    return dataclasses.replace(
        parsed,
        max_calls=one_call_unless_parallel(body),
        template_fields=((REASONING_EFFORT, "reasoning_effort"),),
    )


def parse_completion_body(body: Any, defaults: RequestDefaults) -> ParsedRequest:
    body = json_object(body)
    check_fields(body, COMPLETION_FIELDS, "a text completion request")
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str) or not prompt:
        raise bad_request("'prompt' must be a non-empty string (one prompt per request)", "prompt")
    echo_prompt = body.get("echo") or False
    if not isinstance(echo_prompt, bool):
        raise bad_request(f"'echo' must be true or false, got {echo(echo_prompt)}", "echo")
    source = {"prompt": prompt, **request_fields(body)}
    parsed = with_choice_fields(body, _parsed(body, source, defaults), chat=False)
    return dataclasses.replace(parsed, echo=echo_prompt, prompt_field="prompt")


def _parsed(
    body: dict[str, Any], source: dict[str, Any], defaults: RequestDefaults
) -> ParsedRequest:
    tokens_field = (
        "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    )
    stream_options = body.get("stream_options") or {}
    if not isinstance(stream_options, dict):
        raise bad_request("'stream_options' must be an object", "stream_options")
    return ParsedRequest(
        model=model_name(body),
        generation=generation_fields(body, source, defaults, tokens_field),
        stop=stop_strings(body, "stop"),
        stream=bool(body.get("stream", False)),
        include_usage_chunk=bool(stream_options.get("include_usage", False)),
    )


def _message(item: Any, index: int, images: RequestImages) -> ChatMessage:
    where = f"messages[{index}]"
    if not isinstance(item, dict):
        raise bad_request(f"'{where}' must be an object with 'role' and 'content'", where)
    if is_tool_turn(item):
        return tool_turn(item, where)
    role = item.get("role")
    if role not in CHAT_ROLES:
        raise bad_request(
            f"'{where}.role' is {echo(role)}: use one of {', '.join(CHAT_ROLES)}", f"{where}.role"
        )
    content = item.get("content")
    role = ROLE_ALIASES.get(role, role)
    if isinstance(content, list):
        return _parts(role, content, f"{where}.content", images)
    if not isinstance(content, str):
        raise bad_request(f"'{where}.content' must be a string", f"{where}.content")
    return ChatMessage(role, content)


def _parts(role: str, parts: list[Any], where: str, images: RequestImages) -> ChatMessage:
    """OpenAI's content parts: text, and images in user messages."""
    text: list[str] = []
    placed: list[PlacedImage] = []
    length = 0
    for position, part in enumerate(parts):
        here = f"{where}[{position}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "image_url" and role == "user":
            image = images.from_url(image_url_of(part), f"{here}.image_url.url")
            placed.append(PlacedImage(length, image))
        elif kind == "text" and isinstance(part.get("text"), str):
            text.append(part["text"])
            length += len(part["text"])
        else:
            readable = "text and image_url parts" if role == "user" else "text parts"
            raise bad_request(
                f"'{here}' is a part of type {echo(kind)}: {role} messages may hold only "
                f"{readable}",
                here,
            )
    return ChatMessage(role, "".join(text), images=tuple(placed))
