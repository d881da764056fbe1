"""OpenAI request bodies → the runtime's :class:`GenerationRequest`, with 400s for bad fields.

Sampling fields follow OpenAI's names and defaults (temperature 1, top_p 1) plus the ones local
servers commonly accept (top_k, min_p, seed; seed -1 means random). ``mtp_depth`` is an
extension: ``"auto"`` or a fixed depth for one request (0 turns MTP off), up to the depth the
model was loaded for. A request without ``max_tokens`` may fill the context. Fields the runtime
cannot honour (``logprobs``, the penalties, ``n`` > 1) are refused, never silently ignored. Every
refusal names the field and the accepted values; quoted values are cut short (:mod:`echo`).
:func:`generation_fields` is shared with the Anthropic parser (:mod:`anthropic_parsing`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.depth_policy import AUTO
from app.engine.runtime.prompting import ChatMessage
from app.engine.runtime.request import MAX_DRAFT_DEPTH, GenerationRequest
from app.engine.runtime.sampling import SamplerSettings
from app.engine.server.api_errors import bad_request, unsupported
from app.engine.server.depth import DepthSetting, allowed_depths, deepest
from app.engine.server.echo import clean, echo
from app.engine.server.tool_fields import is_tool_turn, request_fields, tool_turn

CHAT_ROLES = ("system", "developer", "user", "assistant")
ROLE_ALIASES = {"developer": "system"}  # OpenAI's newer name for the system turn
RANDOM_SEED = -1  # llama.cpp's convention: a fresh seed per request
MAX_SEED = 2**64 - 1
MAX_WHOLE_NUMBER = 2**64 - 1
RUNTIME_MESSAGE_CHARACTERS = 200
REFUSED_PENALTIES = ("presence_penalty", "frequency_penalty")


@dataclass(frozen=True)
class ParsedRequest:
    """What a completion request asks for: the generation, its stop strings and how to reply."""

    model: str | None
    generation: GenerationRequest
    stop: tuple[str, ...]
    stream: bool
    include_usage_chunk: bool


@dataclass(frozen=True)
class RequestDefaults:
    """What a request gets for the fields it leaves out, and the deepest ``mtp_depth`` it may
    ask for (the depth the model was loaded for)."""

    depth: DepthSetting
    max_tokens: int
    """A request without ``max_tokens``: the server's ``--max-tokens``, else the context size
    (the runtime ends such a reply when the context is full)."""
    max_depth: int = MAX_DRAFT_DEPTH


def parse_chat_body(body: Any, defaults: RequestDefaults) -> ParsedRequest:
    body = json_object(body)
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise bad_request("'messages' must be a non-empty array of messages", "messages")
    messages = tuple(_message(item, index) for index, item in enumerate(raw_messages))
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


def model_name(body: dict[str, Any]) -> str | None:
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise bad_request(f"'model' must be a string, got {echo(model)}", "model")
    return model


def generation_fields(
    body: dict[str, Any], source: dict[str, Any], defaults: RequestDefaults, tokens_field: str
) -> GenerationRequest:
    """The generation ``body`` asks for over ``source`` (messages or prompt, plus the API's own
    tool and output-constraint fields): length, sampling (temperature, top_p, top_k, min_p,
    seed) and ``mtp_depth``, each checked by name."""
    max_tokens = _integer(body, tokens_field, defaults.max_tokens)
    depth = _depth(body.get("mtp_depth"), defaults)
    try:
        sampler = SamplerSettings(
            temperature=_number(body, "temperature", 1.0),
            top_p=_number(body, "top_p", 1.0),
            top_k=_integer(body, "top_k", 0),
            min_p=_number(body, "min_p", 0.0),
            seed=_seed(body),
        )
        return GenerationRequest(
            **source,
            max_tokens=max_tokens,
            sampler=sampler,
            mtp_depth=deepest(depth),
            adaptive_depth=depth == AUTO,
        )
    except RuntimeBackendError as exc:
        raise bad_request(clean(str(exc), RUNTIME_MESSAGE_CHARACTERS)) from exc


def _refuse_unsupported(body: dict[str, Any]) -> None:
    """400 for OpenAI fields the runtime cannot honour, rather than a reply that ignores them."""
    n = _number(body, "n", 1)
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
        if _number(body, name, 0.0) != 0.0:
            raise unsupported(
                name, body[name], "repetition penalties are not applied by this runtime; send 0"
            )


def _seed(body: dict[str, Any]) -> int | None:
    seed = body.get("seed")
    if seed is None or seed == RANDOM_SEED:
        return None
    seed = _integer(body, "seed", 0)
    if not 0 <= seed <= MAX_SEED:
        raise bad_request(
            f"'seed' must be -1 (random) or a whole number 0 to 2^64-1, got {echo(seed)}", "seed"
        )
    return seed


def _depth(value: Any, defaults: RequestDefaults) -> DepthSetting:
    if value is None:
        return defaults.depth
    if value == AUTO or (
        isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= defaults.max_depth
    ):
        return value
    given = echo(value)
    message = f"'mtp_depth' must be {allowed_depths(defaults.max_depth)}, got {given}"
    if isinstance(value, int) and defaults.max_depth < value <= MAX_DRAFT_DEPTH:
        message += (
            f" (the server loaded the model for depths up to {defaults.max_depth}; start it with "
            f"--mtp-depth {value} to allow it)"
        )
    raise bad_request(message, "mtp_depth")


def json_object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    return body


def _message(item: Any, index: int) -> ChatMessage:
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
    if isinstance(content, list):  # OpenAI's content parts: only text parts can be served
        texts = [part.get("text") for part in content if isinstance(part, dict)]
        if not all(isinstance(text, str) for text in texts) or len(texts) != len(content):
            raise bad_request(f"'{where}.content' may hold only text parts", f"{where}.content")
        content = "".join(texts)
    if not isinstance(content, str):
        raise bad_request(f"'{where}.content' must be a string", f"{where}.content")
    return ChatMessage(ROLE_ALIASES.get(role, role), content)


def stop_strings(body: dict[str, Any], name: str) -> tuple[str, ...]:
    """``body[name]``: one stop string or a list of them (any number), as a tuple."""
    value = body.get(name)
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(stop, str) and stop for stop in stops):
        raise bad_request(
            f"'{name}' must be a non-empty string or a list of them, got {echo(value)}", name
        )
    return tuple(stops)


def _number(body: dict[str, Any], name: str, default: float) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad_request(f"'{name}' must be a number, got {echo(value)}", name)
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise bad_request(f"'{name}' must be a finite number, got {echo(value)}", name)
    return number


def _integer(body: dict[str, Any], name: str, default: int) -> int:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) > MAX_WHOLE_NUMBER:
        raise bad_request(
            f"'{name}' must be a whole number of at most 20 digits, got {echo(value)}", name
        )
    return value
