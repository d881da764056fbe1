"""Fuzzing the request parsers (OpenAI chat and completions, Anthropic messages and count_tokens,
the Responses API): a request or a 400 naming what is wrong, always.

Hypothesis builds bodies near the real shapes — a good body with one field set to an odd value,
and bodies mixing every field the parsers read — with values of any JSON type, numbers of hundreds
of digits, NaN and infinities (Python's ``json`` accepts them), nesting and control characters;
plus arbitrary JSON. Each must parse or raise :class:`ApiError`
400 whose message is one short line; never another exception (a 500 with a traceback).

Bounded: ``max_examples`` per test, a per-example deadline, no example database on disk.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.engine.server.anthropic.parsing import parse_count_tokens_body, parse_messages_body
from app.engine.server.core.api_errors import ApiError
from app.engine.server.core.images import ImageRules, RequestImages
from app.engine.server.openai.parsing import RequestDefaults, parse_chat_body, parse_completion_body
from app.engine.server.responses.parsing import parse_responses_body
from app.engine.server.responses.store import ResponseStore

FUZZ = settings(
    max_examples=100,
    deadline=timedelta(seconds=2),
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
DEFAULTS = RequestDefaults(depth="auto", max_tokens=4096, max_depth=8)
MAX_MESSAGE = 400
HI = [{"role": "user", "content": "Hi"}]
GOOD_BODY = {"messages": HI, "max_tokens": 8}
PARSERS: list[Callable[[Any], object]] = [
    lambda body: parse_chat_body(body, DEFAULTS, RequestImages(ImageRules())),
    lambda body: parse_completion_body(body, DEFAULTS),
    lambda body: parse_messages_body(body, DEFAULTS, RequestImages(ImageRules())),
    lambda body: parse_count_tokens_body(body, RequestImages(ImageRules())),
    lambda body: parse_responses_body(body, DEFAULTS, ResponseStore()),
]
GOOD_BODIES = [
    GOOD_BODY,
    {"prompt": "Hi", "max_tokens": 8},
    GOOD_BODY,
    {"messages": HI},
    {"input": HI, "max_output_tokens": 8},
]
"""A body each parser accepts, in the order of :data:`PARSERS`."""

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(alphabet=st.characters(codec="utf-8"), max_size=200)
    | st.sampled_from(["auto", "user", "system", "developer", "assistant", "text", "image", -1])
    | st.sampled_from(["any", "tool", "none", "required", "function", "object", "toolu_1"])
    | st.sampled_from(["image_url", "base64", "url", "image/png", "data:image/png;base64,iVBO"])
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    *("role", "content", "type", "text", "x", "name", "input_schema"),
                    *("properties", "image_url", "url", "source", "data", "media_type"),
                ]
            ),
            children,
        )
    ),
    max_leaves=30,
)
FIELDS = [
    "model", "messages", "prompt", "system", "max_tokens", "max_completion_tokens",
    "temperature", "top_p", "top_k", "min_p", "seed", "n", "stop", "stop_sequences", "stream",
    "stream_options", "mtp_depth", "logprobs", "top_logprobs", "presence_penalty",
    "frequency_penalty", "tools", "tool_choice", "input", "instructions", "max_output_tokens",
    "text", "reasoning", "include", "previous_response_id", "store", "parallel_tool_calls",
    "reasoning_effort", "echo", "thinking", "output_config", "max_tool_calls",
]  # fmt: skip
messages = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "role": st.sampled_from(["user", "assistant", "system", "developer", "tool"])
            | json_values,
            "content": st.text(max_size=50)
            | st.lists(
                st.fixed_dictionaries(
                    {
                        "type": st.sampled_from(["text", "image", "tool_use", "tool_result"])
                        | json_values
                    },
                    optional={
                        key: json_values
                        for key in ("text", "id", "name", "input", "tool_use_id", "content")
                    },
                ),
                max_size=3,
            )
            | json_values,
        },
    ),
    max_size=4,
)
edge_values = st.sampled_from(
    [10**400, -(10**400), 2**64, -1, 0, float("inf"), float("-inf"), float("nan"), "", []]
)
near_real_bodies = st.fixed_dictionaries(
    {"messages": messages | json_values},
    optional={field: edge_values | json_values for field in FIELDS if field != "messages"},
)


def _check(parse: Callable[[Any], object], body: Any) -> None:
    try:
        parse(body)
    except ApiError as error:
        assert error.status == 400, error.message
        assert len(error.message) < MAX_MESSAGE, error.message
        assert "\n" not in error.message and "\r" not in error.message, error.message


@pytest.mark.slow  # 7–21 s a parser (measured with -n 2 on a shared 2-core machine)
@pytest.mark.parametrize("parser", range(len(PARSERS)))
@FUZZ
@given(body=near_real_bodies)
def test_near_real_bodies_parse_or_get_a_short_400(parser: int, body: dict[str, Any]) -> None:
    _check(PARSERS[parser], body)


@pytest.mark.parametrize("parser", range(len(PARSERS)))
@FUZZ
@given(field=st.sampled_from(FIELDS), value=st.one_of(edge_values, edge_values, json_values))
@pytest.mark.slow
def test_one_odd_field_in_a_good_body_parses_or_gets_a_short_400(
    parser: int, field: str, value: Any
) -> None:
    _check(PARSERS[parser], {**GOOD_BODIES[parser], field: value})


@pytest.mark.parametrize("parser", range(len(PARSERS)))
@FUZZ
@given(body=json_values)
@pytest.mark.slow
def test_any_json_parses_or_gets_a_short_400(parser: int, body: Any) -> None:
    _check(PARSERS[parser], body)


@pytest.mark.parametrize("value", [10**400, float("inf"), float("nan")])
@pytest.mark.parametrize("field", ["temperature", "top_p", "n", "presence_penalty"])
def test_numbers_past_a_float_or_not_finite_are_a_400_naming_the_field(
    field: str, value: float
) -> None:
    """Found by the fuzzer: ``float(10**400)`` raised OverflowError (a 500), and an infinite
    temperature was accepted. (``n`` is a whole number.)"""
    with pytest.raises(ApiError) as caught:
        parse_chat_body({**GOOD_BODY, field: value}, DEFAULTS, RequestImages(ImageRules()))
    finite = ("temperature", "top_p", "presence_penalty")
    says = "must be a finite number" if field in finite else "must be a whole number"
    assert caught.value.param == field and says in caught.value.message
    assert len(caught.value.message) < MAX_MESSAGE


@pytest.mark.parametrize("field", ["max_tokens", "top_k", "seed"])
def test_whole_numbers_of_hundreds_of_digits_are_a_short_400(field: str) -> None:
    """Found by the fuzzer: the runtime's own check quoted all 400 digits back."""
    with pytest.raises(ApiError) as caught:
        parse_chat_body({**GOOD_BODY, field: -(10**400)}, DEFAULTS, RequestImages(ImageRules()))
    assert caught.value.param == field and len(caught.value.message) < MAX_MESSAGE


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"tool_choice": {"type": []}}, "tool_choice"),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": {}}]}
                ]
            },
            "messages[0].content[0].tool_use_id",
        ),
    ],
)
def test_unhashable_tool_fields_on_messages_are_a_400_naming_the_field(
    fields: dict[str, Any], param: str
) -> None:
    """Found by the fuzzer: a list or object where Anthropic's tool fields take a string was
    looked up in a dict (TypeError, a 500)."""
    with pytest.raises(ApiError) as caught:
        parse_messages_body({**GOOD_BODY, **fields}, DEFAULTS, RequestImages(ImageRules()))
    assert caught.value.param == param
