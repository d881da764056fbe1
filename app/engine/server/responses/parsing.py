"""Responses API request bodies → the :class:`ParsedRequest` every API ends in, plus what the
response object repeats and what the store keeps.

``input`` (:mod:`.input_items`) after ``instructions`` (a system message) and, with
``previous_response_id``, after the kept conversation it continues (:mod:`.store`); function
``tools`` (flat, as this API writes them), ``tool_choice``, ``text.format``, ``reasoning.effort``,
``max_tool_calls``/``parallel_tool_calls`` and the sampling fields both chat APIs share. Every
field is checked against its table (:mod:`.field_table`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.chat_format.tools import AUTO, ToolChoice, ToolSpec
from app.engine.server.core.api_errors import bad_request
from app.engine.server.core.echo import echo
from app.engine.server.core.field_rules import check_fields
from app.engine.server.core.function_tools import (
    function_choice,
    function_spec,
    function_tools,
    schema_output,
    tool_request_fields,
    worded_tool_choice,
)
from app.engine.server.core.request_fields import (
    REASONING_EFFORT,
    ParsedRequest,
    RequestDefaults,
    generation_fields,
    integer,
    json_object,
    model_name,
    one_call_unless_parallel,
    reasoning_effort,
)
from app.engine.server.responses.field_table import RESPONSES_FIELDS
from app.engine.server.responses.input_items import input_turns
from app.engine.server.responses.store import History, ResponseStore

ACCEPTED_INCLUDES = ("reasoning.encrypted_content",)
LOGPROBS_INCLUDE = "message.output_text.logprobs"


@dataclass(frozen=True)
class ResponsesRequest:
    parsed: ParsedRequest
    echoed: dict[str, Any]
    """What the response object repeats of the request (instructions, tools, …)."""
    previous_id: str | None
    store: bool
    new_turns: tuple[ChatMessage, ...]
    """This request's own input turns (without ``instructions``): kept with its output."""


def parse_responses_body(
    body: Any, defaults: RequestDefaults, store: ResponseStore
) -> ResponsesRequest:
    body = json_object(body)
    check_fields(body, RESPONSES_FIELDS, "a Responses request")
    previous_id = _optional_string(body, "previous_response_id")
    history = store.history(previous_id) if previous_id else History((), {})
    read = input_turns(body.get("input"), history.called)
    instructions = _optional_string(body, "instructions")
    system = (ChatMessage("system", instructions),) if instructions else ()
    tools = function_tools(body.get("tools"), _tool)
    choice = _tool_choice(body.get("tool_choice"), tools)
    text_format = _text_format(body.get("text"))
    source: dict[str, Any] = {
        "messages": (*system, *history.turns, *read.turns),
        **tool_request_fields(tools, choice, text_format),
    }
    if _truncates(body.get("truncation")):
        source["trim_history"] = True
    effort = _effort(body.get("reasoning"))
    if effort is not None:
        source["template_variables"] = ((REASONING_EFFORT, effort),)
    _check_include(body.get("include"))
    keep = True if body.get("store") is None else body["store"]
    if not isinstance(keep, bool):
        raise bad_request(f"'store' must be true or false, got {echo(keep)}", "store")
    parsed = ParsedRequest(
        model=model_name(body),
        generation=generation_fields(body, source, defaults, "max_output_tokens"),
        stop=(),
        stream=bool(body.get("stream", False)),
        include_usage_chunk=False,
        max_calls=_max_calls(body),
        template_fields=((REASONING_EFFORT, "reasoning.effort"),),
        passed_over=tuple(read.passed_over),
        prompt_field="input",
    )
    return ResponsesRequest(parsed, _echoed(body), previous_id, keep, tuple(read.turns))


def _optional_string(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise bad_request(f"'{name}' must be a string, got {echo(value)}", name)
    return value


def _tool(item: Any, where: str) -> ToolSpec:
    if not isinstance(item, dict) or item.get("type") != "function":
        kind = item.get("type") if isinstance(item, dict) else None
        raise bad_request(
            f"'{where}' is a tool of type {echo(kind)}: this server runs function tools "
            '({"type": "function", "name": ..., "parameters": {...}}) only',
            where,
        )
    return function_spec(item.get("name"), item.get("description"), item.get("parameters"), where)


def _tool_choice(value: Any, tools: tuple[ToolSpec, ...]) -> ToolChoice:
    if (worded := worded_tool_choice(value, tools)) is not None:
        return worded
    name = value.get("name") if isinstance(value, dict) else None
    if not isinstance(value, dict) or value.get("type") != "function" or not isinstance(name, str):
        raise bad_request(
            "'tool_choice' must be 'none', 'auto', 'required' or "
            f'{{"type": "function", "name": ...}}, got {echo(value)}',
            "tool_choice",
        )
    return function_choice(name, tools, echo(name))


def _text_format(value: Any) -> Any:
    """The output constraint ``text.format`` asks for (None for plain text)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise bad_request("'text' must be an object", "text")
    if value.get("verbosity") not in (None, "medium"):
        raise bad_request(
            f"'text.verbosity' {echo(value['verbosity'])} is not supported: the served model "
            "has no verbosity setting",
            "text.verbosity",
        )
    text_format = value.get("format")
    kind = text_format.get("type") if isinstance(text_format, dict) else None
    if text_format is None or kind == "text":
        return None
    if kind == "json_object":
        return schema_output(None, "text.format")
    if kind != "json_schema":
        raise bad_request(
            "'text.format.type' must be 'text', 'json_object' or 'json_schema'", "text.format"
        )
    return schema_output(text_format.get("schema"), "text.format", text_format.get("name"))


def _effort(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise bad_request("'reasoning' must be an object", "reasoning")
    for name in ("summary", "generate_summary"):
        if value.get(name) is not None:
            raise bad_request(
                f"'reasoning.{name}' {echo(value[name])} is not supported: this server writes "
                "no reasoning summaries",
                f"reasoning.{name}",
            )
    return reasoning_effort(value.get("effort"), "reasoning.effort")


def _truncates(value: Any) -> bool:
    """``truncation``: ``auto`` leaves the oldest turns out when the conversation does not
    fit."""
    if value not in (None, "auto", "disabled"):
        raise bad_request(
            f"'truncation' must be 'auto' or 'disabled', got {echo(value)}", "truncation"
        )
    return value == "auto"


def _check_include(value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise bad_request("'include' must be an array of strings", "include")
    for item in value:
        if item == LOGPROBS_INCLUDE:
            raise bad_request(
                f"'include' {echo(item)} is not supported yet: the runtime does not report "
                "token log-probabilities",
                "include",
            )
        if item not in ACCEPTED_INCLUDES:
            raise bad_request(
                f"'include' {echo(item)} is not supported: this server adds nothing to a "
                "response's output",
                "include",
            )


def _max_calls(body: dict[str, Any]) -> int | None:
    limits = [one_call_unless_parallel(body)]
    if body.get("max_tool_calls") is not None:
        most = integer(body, "max_tool_calls", 0)
        if most < 1:
            raise bad_request(
                f"'max_tool_calls' must be 1 or more, got {echo(most)}", "max_tool_calls"
            )
        limits.append(most)
    known = [limit for limit in limits if limit is not None]
    return min(known) if known else None


def _echoed(body: dict[str, Any]) -> dict[str, Any]:
    """The request's settings as the response object states them (defaults filled in)."""

    def given(name: str, default: Any = None) -> Any:
        value = body.get(name)
        return default if value is None else value

    metadata = given("metadata", {})
    if not isinstance(metadata, dict):
        raise bad_request("'metadata' must be an object of strings", "metadata")
    return {
        "instructions": given("instructions"),
        "max_output_tokens": given("max_output_tokens"),
        "max_tool_calls": given("max_tool_calls"),
        "metadata": metadata,
        "parallel_tool_calls": given("parallel_tool_calls", True),
        "previous_response_id": given("previous_response_id"),
        "reasoning": {"effort": given("reasoning", {}).get("effort"), "summary": None},
        "store": given("store", True),
        "temperature": given("temperature", 1.0),
        "text": {"format": given("text", {}).get("format") or {"type": "text"}},
        "tool_choice": given("tool_choice", AUTO),
        "tools": given("tools", []),
        "top_p": given("top_p", 1.0),
        "truncation": given("truncation", "disabled"),
        "user": given("user"),
    }
