"""Every request field an API defines, and what this server does with it — never silently ignored.

A field is **honoured** (it changes the reply as the docs say), **refused until the runtime
supports it** or **refused** (a value that asks for something is a 400 naming the field; the
values that ask for nothing — ``n: 1``, ``logprobs: false``, a penalty of 0 — are accepted), or
**ignored on purpose** (accepted, with the reason written down: ``user``, ``metadata``, ``store``
…). A field no table lists is a 400 naming it, so a typo or a feature this server lacks is never
mistaken for one it has. Each API room declares its table (``openai/field_table.py``,
``anthropic/field_table.py``, ``responses/field_table.py``) from the shared rows here;
docs/server-api.md#request-fields shows them and tests/server/test_field_table.py walks them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.engine.server.core.api_errors import bad_request, unsupported
from app.engine.server.core.echo import echo

HONOURED = "honoured"
RUNTIME_PENDING = "refused until the runtime supports it"
REFUSED = "refused"
IGNORED = "ignored on purpose"


@dataclass(frozen=True)
class FieldRule:
    """``says``: what the server does with the field (honoured) or why it does not."""

    treatment: str
    says: str
    neutral: tuple[Any, ...] = (None,)
    """The values of a refused field that ask for nothing, and are accepted."""

    def refuses(self, value: Any) -> bool:
        if self.treatment not in (REFUSED, RUNTIME_PENDING):
            return False
        return not any(_same(value, neutral) for neutral in self.neutral)


FieldTable = Mapping[str, FieldRule]


def honoured(says: str) -> FieldRule:
    return FieldRule(HONOURED, says)


def ignored(why: str) -> FieldRule:
    return FieldRule(IGNORED, why)


def refused(why: str, *neutral: Any) -> FieldRule:
    return FieldRule(REFUSED, why, (None, *neutral))


def runtime_pending(why: str, *neutral: Any) -> FieldRule:
    return FieldRule(RUNTIME_PENDING, why, (None, *neutral))


def check_fields(body: dict[str, Any], table: FieldTable, where: str) -> None:
    """400 naming the first field of ``body`` that ``table`` does not list or refuses."""
    for name, value in body.items():
        rule = table.get(name)
        if rule is None:
            raise bad_request(
                f"'{echo(name)[1:-1]}' is not a field of {where} that this server knows; remove "
                "it (docs/server-api.md#request-fields lists every field and what is done with "
                "it)",
                name,
            )
        if rule.refuses(value):
            if rule.treatment == RUNTIME_PENDING:
                raise bad_request(f"'{name}' {echo(value)} is not supported yet: {rule.says}", name)
            raise unsupported(name, value, rule.says)


def _same(value: Any, neutral: Any) -> bool:
    """Equal as JSON values: ``1`` and ``1.0`` alike, ``true`` never equal to ``1``."""
    if isinstance(value, bool) or isinstance(neutral, bool):
        return type(value) is type(neutral) and value == neutral
    if isinstance(value, int | float) and isinstance(neutral, int | float):
        return value == neutral
    return type(value) is type(neutral) and value == neutral


# --- the rows both chat APIs share ---------------------------------------------------------------

SAMPLING = {
    "temperature": honoured("0 = greedy; higher spreads the choice of each token"),
    "top_p": honoured("keep the most likely tokens whose probability adds up to top_p"),
    "top_k": honoured("keep the k most likely tokens (0 = all)"),
    "min_p": honoured("keep tokens at least min_p × the likeliest one's probability"),
    "seed": honoured(
        "the same seed repeats a sampled reply at a fixed mtp_depth; -1 = a random seed"
    ),
    "mtp_depth": honoured(
        'this server\'s extension: "auto" or a fixed number of drafted tokens per cycle (0 = '
        "plain decoding); the reply's mtp object says which ran"
    ),
}
"""Sampling and drafting fields read the same way by every API (``request_fields``)."""

_REPETITION = honoured(
    "llama.cpp's rule over the last 64 tokens of the prompt and the reply: a repeated token's "
    "logit is divided by it (multiplied when negative); 1 = off"
)
PENALTIES = {
    "presence_penalty": honoured(
        "OpenAI's: a token already in the reply loses this much logit (-2 to 2)"
    ),
    "frequency_penalty": honoured(
        "OpenAI's: a token loses this much logit for each time it is in the reply (-2 to 2)"
    ),
    "repetition_penalty": _REPETITION,
    "repeat_penalty": _REPETITION,
    "logit_bias": honoured("token id → bias added to its logit (-100 to 100); -100 bans the token"),
}
"""Penalties and bias (OpenAI's completion APIs): applied to the drafts' and the target's
distributions alike, so MTP stays exact."""

RUNTIME_PENDING_SAMPLING = {
    "ignore_eos": runtime_pending("the runtime always stops at the end-of-turn token", False),
    "min_tokens": runtime_pending("the runtime has no minimum reply length", 0),
    "n": runtime_pending("this server generates one reply per request", 1),
}
"""Fields the runtime cannot honour yet (issue 33's runtime half): each a 400 unless neutral."""

END_USER = ignored(
    "an end-user id for the provider's abuse monitoring: nothing to monitor on a local server, "
    "and it is never logged"
)
PICKS_MODEL = honoured(
    "picks the model that answers, named in the reply: its id, a short name only it has, or an "
    "--alias (Claude Code's own names with --alias 'claude-*'); a name the server does not have "
    "is a 404 naming what it has"
)
