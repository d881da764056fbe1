"""OpenAI's fields about what a reply reports and how many replies there are: ``logprobs`` and
``top_logprobs`` (chat), ``logprobs`` (completions' legacy integer), ``min_tokens``,
``ignore_eos`` and ``n``.

They become the runtime request's ``logprobs`` (None or the number of alternatives),
``min_tokens`` and ``ignore_eos``, and the parsed request's ``choices``: n replies to the same
prompt, choice i sampled with seed s + i (s the request's seed, or one drawn for it), so each
choice is the reply a request with that seed gets (docs/server-api.md#several-choices-n).
"""

from __future__ import annotations

import dataclasses
import secrets
from typing import Any

from app.engine.runtime.sampling.logprobs import MAX_TOP_LOGPROBS
from app.engine.server.core.api_errors import bad_request
from app.engine.server.core.echo import echo
from app.engine.server.core.request_fields import MAX_SEED, ParsedRequest, integer

MAX_CHOICES = 16
"""The most choices one request may ask for (each is a whole generation, one after another)."""


def with_choice_fields(body: dict[str, Any], parsed: ParsedRequest, *, chat: bool) -> ParsedRequest:
    """``parsed`` with ``body``'s log-probability, minimum-length, end and ``n`` fields."""
    generation = dataclasses.replace(
        parsed.generation,
        logprobs=_chat_logprobs(body) if chat else _counted("logprobs", body.get("logprobs")),
        min_tokens=_min_tokens(body, parsed.generation.max_tokens),
        ignore_eos=_flag(body, "ignore_eos"),
    )
    choices = _counted("n", body.get("n"), least=1, most=MAX_CHOICES) or 1
    if choices > 1 and generation.sampler.seed is None:  # one seed the choices count from
        sampler = dataclasses.replace(generation.sampler, seed=secrets.randbits(63))
        generation = dataclasses.replace(generation, sampler=sampler)
    return dataclasses.replace(parsed, generation=generation, choices=choices)


def choice_request(parsed: ParsedRequest, index: int) -> ParsedRequest:
    """Choice ``index`` of ``parsed``: its seed is the request's plus ``index``."""
    if index == 0:
        return parsed
    sampler = parsed.generation.sampler
    assert sampler.seed is not None, "with_choice_fields fixes the seed of several choices"
    seeded = dataclasses.replace(sampler, seed=(sampler.seed + index) % (MAX_SEED + 1))
    return dataclasses.replace(
        parsed, generation=dataclasses.replace(parsed.generation, sampler=seeded)
    )


def _chat_logprobs(body: dict[str, Any]) -> int | None:
    asked = _flag(body, "logprobs")
    top = _counted("top_logprobs", body.get("top_logprobs"), most=MAX_TOP_LOGPROBS)
    if top and not asked:
        raise bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs")
    return (top or 0) if asked else None


def _counted(name: str, value: Any, *, least: int = 0, most: int = MAX_TOP_LOGPROBS) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise bad_request(
            f"'{name}' must be a whole number from {least} to {most}, got {echo(value)}", name
        )
    return value


def _flag(body: dict[str, Any], name: str) -> bool:
    value = body.get(name)
    if value is not None and not isinstance(value, bool):
        raise bad_request(f"'{name}' must be true or false, got {echo(value)}", name)
    return bool(value)


def _min_tokens(body: dict[str, Any], max_tokens: int) -> int:
    least = integer(body, "min_tokens", 0)
    if not 0 <= least <= max_tokens:
        raise bad_request(
            f"'min_tokens' must be from 0 to the reply's maximum length ({max_tokens}), got "
            f"{echo(least)}",
            "min_tokens",
        )
    return least
