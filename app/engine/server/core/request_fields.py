"""The request fields both APIs share: the model name, length, sampling, seed, ``mtp_depth`` and
stop strings, checked by name and turned into the runtime's :class:`GenerationRequest`.

Sampling fields follow OpenAI's names and defaults (temperature 1, top_p 1, presence and
frequency penalties 0, logit_bias) plus the ones local servers commonly accept (top_k, min_p,
seed — -1 means random — and repetition_penalty, llama.cpp's repeat_penalty). ``mtp_depth`` is an
extension: ``"auto"`` or a fixed depth for one request (0 turns MTP off), up to the depth the
model was loaded for. A request without ``max_tokens`` may fill the context. Every refusal
names the field and the accepted values; quoted values are cut short (:mod:`.echo`). Each API's
parser (:mod:`app.engine.server.openai.parsing`, :mod:`app.engine.server.anthropic.parsing`)
reads its own message shapes and ends in one :class:`ParsedRequest`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.chat_format.schema_limits import check_schema_size
from app.engine.runtime.chat_format.tools import NONE
from app.engine.runtime.core.request import MAX_DRAFT_DEPTH, GenerationRequest
from app.engine.runtime.sampling.sampler import BANNING_BIAS, MAX_BIAS, SamplerSettings
from app.engine.runtime.speculative.depth_policy import AUTO
from app.engine.server.core.api_errors import bad_request
from app.engine.server.core.config import MAX_STOP_CHARACTERS, MAX_STOP_STRINGS, MAX_TOOLS
from app.engine.server.core.depth import DepthSetting, allowed_depths, deepest
from app.engine.server.core.echo import clean, echo

RANDOM_SEED = -1  # llama.cpp's convention: a fresh seed per request
MAX_SEED = 2**64 - 1
MAX_WHOLE_NUMBER = 2**64 - 1
RUNTIME_MESSAGE_CHARACTERS = 200
REASONING_EFFORT = "reasoning_effort"
"""The template variable gpt-oss's chat template (and others) read."""
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
MAX_LOGIT_BIASES = 1024
"""The most token ids one ``logit_bias`` may list."""


@dataclass(frozen=True)
class ParsedRequest:
    """What a completion request asks for: the generation, its stop strings and how to reply.

    ``max_calls``: the reply ends after this many tool calls (``parallel_tool_calls: false`` is
    one). ``template_fields``: the request field each of the generation's template variables
    came from (a 400 names it when the model's template does not read the variable).
    ``passed_over``: what the request held that the prompt leaves out (a thinking block …),
    for the request's log line. ``echo``: the reply's text starts with the prompt.
    ``prompt_field``: the field that holds the conversation (named by a too-long prompt's 400)."""

    model: str | None
    generation: GenerationRequest
    stop: tuple[str, ...]
    stream: bool
    include_usage_chunk: bool
    max_calls: int | None = None
    template_fields: tuple[tuple[str, str], ...] = ()
    passed_over: tuple[str, ...] = ()
    echo: bool = False
    prompt_field: str = "messages"


@dataclass(frozen=True)
class RequestDefaults:
    """What a request gets for the fields it leaves out, and the deepest ``mtp_depth`` it may
    ask for (the depth the model was loaded for)."""

    depth: DepthSetting
    max_tokens: int
    """A request without ``max_tokens``: the server's ``--max-tokens``, else the context size
    (the runtime ends such a reply when the context is full)."""
    max_depth: int = MAX_DRAFT_DEPTH


def json_object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    return body


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
    seed, penalties, logit_bias) and ``mtp_depth``, each checked by name."""
    max_tokens = integer(body, tokens_field, defaults.max_tokens)
    depth = _depth(body.get("mtp_depth"), defaults)
    try:
        sampler = SamplerSettings(
            temperature=number(body, "temperature", 1.0),
            top_p=number(body, "top_p", 1.0),
            top_k=integer(body, "top_k", 0),
            min_p=number(body, "min_p", 0.0),
            seed=_seed(body),
            presence_penalty=_penalty(body, "presence_penalty"),
            frequency_penalty=_penalty(body, "frequency_penalty"),
            repetition_penalty=_repetition_penalty(body),
            logit_bias=_logit_bias(body),
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


def stop_strings(body: dict[str, Any], name: str) -> tuple[str, ...]:
    """``body[name]``: one stop string or a list of up to :data:`MAX_STOP_STRINGS` of them (each
    up to :data:`MAX_STOP_CHARACTERS` long), as a tuple."""
    value = body.get(name)
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(stop, str) and stop for stop in stops):
        raise bad_request(
            f"'{name}' must be a non-empty string or a list of them, got {echo(value)}", name
        )
    if len(stops) > MAX_STOP_STRINGS:
        raise bad_request(
            f"'{name}' lists {len(stops)} stop strings; this server accepts at most "
            f"{MAX_STOP_STRINGS}",
            name,
        )
    longest = max(stops, key=len, default="")
    if len(longest) > MAX_STOP_CHARACTERS:
        raise bad_request(
            f"'{name}' holds a stop string of {len(longest):,} characters "
            f"({echo(longest)}); this server accepts at most {MAX_STOP_CHARACTERS} per string",
            name,
        )
    return tuple(stops)


def _seed(body: dict[str, Any]) -> int | None:
    seed = body.get("seed")
    if seed is None or seed == RANDOM_SEED:
        return None
    seed = integer(body, "seed", 0)
    if not 0 <= seed <= MAX_SEED:
        raise bad_request(
            f"'seed' must be -1 (random) or a whole number 0 to 2^64-1, got {echo(seed)}", "seed"
        )
    return seed


def _penalty(body: dict[str, Any], name: str) -> float:
    value = number(body, name, 0.0)
    if not -2.0 <= value <= 2.0:
        raise bad_request(f"'{name}' must be from -2 to 2 (0 = off), got {echo(value)}", name)
    return value


def _repetition_penalty(body: dict[str, Any]) -> float:
    """``repetition_penalty`` (Hugging Face's, vLLM's name) or ``repeat_penalty`` (llama.cpp's)."""
    name = "repetition_penalty" if body.get("repetition_penalty") is not None else "repeat_penalty"
    value = number(body, name, 1.0)
    if value <= 0.0:
        raise bad_request(f"'{name}' must be above 0 (1 = off), got {echo(value)}", name)
    return value


def _logit_bias(body: dict[str, Any]) -> tuple[tuple[int, float], ...]:
    """``{"token id": bias}``, biases -100 (bans the token) to 100, in id order."""
    value = body.get("logit_bias")
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise bad_request(
            f"'logit_bias' must be an object of token ids and biases, got {echo(value)}",
            "logit_bias",
        )
    if len(value) > MAX_LOGIT_BIASES:
        raise bad_request(
            f"'logit_bias' lists {len(value):,} tokens; this server accepts at most "
            f"{MAX_LOGIT_BIASES}",
            "logit_bias",
        )
    biases = {}
    for key in value:
        if not (isinstance(key, str) and key.isascii() and key.isdigit() and len(key) <= 12):
            raise bad_request(
                f"'logit_bias' keys must be token ids (whole numbers ≥ 0), got {echo(key)}",
                "logit_bias",
            )
        bias = value[key]
        if isinstance(bias, bool) or not isinstance(bias, int | float):
            bias = math.nan
        if not BANNING_BIAS <= bias <= MAX_BIAS:
            raise bad_request(
                f"'logit_bias' biases must be numbers from -100 (bans the token) to 100, got "
                f"{echo(value[key])} for token {key}",
                "logit_bias",
            )
        biases[int(key)] = float(bias)
    return tuple(sorted(biases.items()))


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


def number(body: dict[str, Any], name: str, default: float) -> float:
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


def integer(body: dict[str, Any], name: str, default: int) -> int:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) > MAX_WHOLE_NUMBER:
        raise bad_request(
            f"'{name}' must be a whole number of at most 20 digits, got {echo(value)}", name
        )
    return value


def check_tool_count(tools: list[Any]) -> None:
    """400 when ``tools`` offers more than :data:`MAX_TOOLS`."""
    if len(tools) > MAX_TOOLS:
        raise bad_request(
            f"'tools' offers {len(tools):,} tools; this server accepts at most {MAX_TOOLS} per "
            "request",
            "tools",
        )


def check_schemas(schemas: list[Any], field: str) -> None:
    """400 naming ``field`` when ``schemas`` together pass the grammar compiler's size limits
    (checked whether or not they are compiled: the worker renders them into the prompt)."""
    try:
        check_schema_size(schemas, f"'{field}'")
    except RuntimeBackendError as exc:
        raise bad_request(str(exc), field) from None


def reasoning_effort(value: Any, field: str) -> str | None:
    """The effort a request asks the model's template for (None: the template's default)."""
    if value is None:
        return None
    if value not in REASONING_EFFORTS:
        raise bad_request(
            f"'{field}' must be one of {', '.join(REASONING_EFFORTS)}, got {echo(value)}", field
        )
    return str(value)


def one_call_unless_parallel(body: dict[str, Any]) -> int | None:
    """``parallel_tool_calls: false`` → the reply ends after one call."""
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise bad_request(
            f"'parallel_tool_calls' must be true or false, got {echo(parallel)}",
            "parallel_tool_calls",
        )
    return 1 if parallel is False else None


def parses_calls(request: GenerationRequest) -> bool:
    """Whether the reply is read for tool calls: tools were offered and not turned off."""
    return bool(request.tools) and request.tool_choice.mode != NONE
