"""OpenAI request bodies (chat and text completions) → a :class:`ParsedRequest`, with 400s.

The fields both APIs share (length, sampling, seed, ``mtp_depth``, stop strings) are read by
:mod:`app.engine.server.core.request_fields`; this module reads OpenAI's own: ``messages`` or
``prompt``, ``stream_options``, the tool fields (:mod:`.tool_fields`). A user message's content
may be a list of ``text`` and ``image_url`` parts (:mod:`app.engine.server.core.images`; an
image's ``detail`` hint is not used: the projector sizes every image itself). Fields the runtime
cannot honour (``logprobs``, the penalties, ``n`` > 1) are refused, never silently ignored.
"""

from __future__ import annotations

from typing import Any

from app.engine.runtime.chat_format.prompting import ChatMessage, PlacedImage
from app.engine.server.core.api_errors import bad_request, unsupported
from app.engine.server.core.echo import echo
from app.engine.server.core.images import RequestImages, image_url_of
from app.engine.server.core.request_fields import (
    ParsedRequest,
    RequestDefaults,
    generation_fields,
    json_object,
    model_name,
    number,
    stop_strings,
)
from app.engine.server.openai.tool_fields import is_tool_turn, request_fields, tool_turn

CHAT_ROLES = ("system", "developer", "user", "assistant")
ROLE_ALIASES = {"developer": "system"}  # OpenAI's newer name for the system turn
REFUSED_PENALTIES = ("presence_penalty", "frequency_penalty")


def parse_chat_body(body: Any, defaults: RequestDefaults, images: RequestImages) -> ParsedRequest:
    body = json_object(body)
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise bad_request("'messages' must be a non-empty array of messages", "messages")
    messages = tuple(_message(item, index, images) for index, item in enumerate(raw_messages))
    return _parsed(body, {"messages": messages}, defaults)


def parse_completion_body(body: Any, defaults: RequestDefaults) -> ParsedRequest:
    body = json_object(body)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str) or not prompt:
        raise bad_request("'prompt' must be a non-empty string (one prompt per request)", "prompt")
    return _parsed(body, {"prompt": prompt}, defaults)


def _parsed(
    body: dict[str, Any], source: dict[str, Any], defaults: RequestDefaults
) -> ParsedRequest:
    _refuse_unsupported(body)
    tokens_field = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
    stream_options = body.get("stream_options") or {}
    if not isinstance(stream_options, dict):
        raise bad_request("'stream_options' must be an object", "stream_options")
    return ParsedRequest(
        model=model_name(body),
        generation=generation_fields(
            body, {**source, **request_fields(body)}, defaults, tokens_field
        ),
        stop=stop_strings(body, "stop"),
        stream=bool(body.get("stream", False)),
        include_usage_chunk=bool(stream_options.get("include_usage", False)),
    )


def _refuse_unsupported(body: dict[str, Any]) -> None:
    """400 for OpenAI fields the runtime cannot honour, rather than a reply that ignores them."""
    n = number(body, "n", 1)
    if n != 1:
        raise unsupported("n", body["n"], "this server generates one choice per request; send n=1")
    if body.get("logprobs") not in (None, False):
        raise unsupported(
            "logprobs", body["logprobs"], "the runtime does not report token log-probabilities"
        )
    if body.get("top_logprobs") is not None:
        raise unsupported(
            "top_logprobs",
            body["top_logprobs"],
            "the runtime does not report token log-probabilities",
        )
    for name in REFUSED_PENALTIES:
        if number(body, name, 0.0) != 0.0:
            raise unsupported(
                name, body[name], "repetition penalties are not applied by this runtime; send 0"
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
