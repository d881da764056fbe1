"""OpenAI's tool and structured-output fields: ``tools``, ``tool_choice``, ``response_format``,
tool-call turns in ``messages``, and ``tool_calls`` in replies (whole, and streamed as they are
written: the call's id and name, then its arguments in pieces).

The fields become the runtime's wire-independent values (:class:`ToolSpec`, :class:`ToolChoice`,
:class:`OutputConstraint`, :class:`ToolCall`), checked here so that a bad schema or an unknown
function is a 400 naming the field before anything is generated or streamed.
"""

from __future__ import annotations

from typing import Any

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.chat_format.constraint import (
    JSON_OBJECT_SCHEMA,
    OutputConstraint,
    json_schema_constraint,
)
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.chat_format.tool_call_events import ArgumentsPiece, CallStarted
from app.engine.runtime.chat_format.tools import ToolCall, ToolChoice, ToolSpec
from app.engine.server.core.api_errors import bad_request
from app.engine.server.core.function_tools import (
    function_choice,
    function_spec,
    function_tools,
    tool_request_fields,
    worded_tool_choice,
)
from app.engine.server.core.reply_stream import WholeReply


def request_fields(body: dict[str, Any]) -> dict[str, Any]:
    """The :class:`GenerationRequest` fields for the body's ``tools``, ``tool_choice`` and
    ``response_format`` (only those it sets; see :func:`tool_request_fields`)."""
    tools = function_tools(body.get("tools"), _tool)
    choice = _tool_choice(body.get("tool_choice"), tools)
    return tool_request_fields(tools, choice, _response_format(body.get("response_format")))


def _tool(item: Any, where: str) -> ToolSpec:
    function = item.get("function") if isinstance(item, dict) else None
    if (
        not isinstance(item, dict)
        or item.get("type") != "function"
        or not isinstance(function, dict)
    ):
        raise bad_request(
            f'\'{where}\' must be {{"type": "function", "function": {{"name": ...}}}}',
            where,
        )
    return function_spec(
        function.get("name"),
        function.get("description"),
        function.get("parameters"),
        f"{where}.function",
    )


def _tool_choice(value: Any, tools: tuple[ToolSpec, ...]) -> ToolChoice:
    if (worded := worded_tool_choice(value, tools)) is not None:
        return worded
    function = value.get("function") if isinstance(value, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str):
        raise bad_request(
            "'tool_choice' must be 'none', 'auto', 'required' or "
            '{"type": "function", "function": {"name": ...}}',
            "tool_choice",
        )
    return function_choice(name, tools, repr(name))


def _response_format(value: Any) -> OutputConstraint | None:
    if value is None:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return json_schema_constraint(JSON_OBJECT_SCHEMA, "'response_format'")
    if kind != "json_schema":
        raise bad_request(
            "'response_format.type' must be 'text', 'json_object' or 'json_schema'",
            "response_format",
        )
    spec = value.get("json_schema")
    schema = spec.get("schema", {}) if isinstance(spec, dict) else None
    if not isinstance(schema, dict):
        raise bad_request(
            "'response_format.json_schema' must be an object with a 'schema' object",
            "response_format.json_schema",
        )
    name = spec.get("name") if isinstance(spec, dict) else None
    what = f"'response_format.json_schema' ({name})" if name else "'response_format.json_schema'"
    try:
        return json_schema_constraint(schema, what)
    except RuntimeBackendError as exc:
        raise bad_request(str(exc), "response_format.json_schema") from None


# --- messages ---------------------------------------------------------------------------------


def is_tool_turn(item: dict[str, Any]) -> bool:
    """True for a ``tool`` result message or an assistant message carrying ``tool_calls``."""
    return item.get("role") == "tool" or bool(item.get("tool_calls"))


def tool_turn(item: dict[str, Any], where: str) -> ChatMessage:
    """A ``tool`` result or an assistant turn with calls (its ``content`` may be null)."""
    content = _text(item.get("content"), f"{where}.content")
    if item.get("role") == "tool":
        call_id = item.get("tool_call_id")
        if not isinstance(call_id, str):
            raise bad_request(
                f"'{where}.tool_call_id' must name the call this result answers",
                f"{where}.tool_call_id",
            )
        name = item.get("name")
        return ChatMessage("tool", content, tool_call_id=call_id, name=name or None)
    if item.get("role") != "assistant":
        raise bad_request(f"'{where}.tool_calls' is allowed on assistant messages only", where)
    calls = item.get("tool_calls")
    if not isinstance(calls, list):
        raise bad_request(f"'{where}.tool_calls' must be an array", f"{where}.tool_calls")
    return ChatMessage(
        "assistant",
        content,
        tool_calls=tuple(
            _call(call, f"{where}.tool_calls[{index}]") for index, call in enumerate(calls)
        ),
    )


def _text(value: Any, where: str) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        texts = [part.get("text") for part in value if isinstance(part, dict)]
        if len(texts) == len(value) and all(isinstance(text, str) for text in texts):
            return "".join(texts)
    if not isinstance(value, str):
        raise bad_request(f"'{where}' must be a string, text parts or null", where)
    return value


def _call(value: Any, where: str) -> ToolCall:
    function = value.get("function") if isinstance(value, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    arguments = function.get("arguments", "{}") if isinstance(function, dict) else None
    if not isinstance(name, str) or not isinstance(arguments, str):
        raise bad_request(
            f'\'{where}\' must be {{"id": ..., "type": "function", "function": '
            '{"name": ..., "arguments": "<JSON text>"}}',
            where,
        )
    call_id = value.get("id")
    return ToolCall(call_id if isinstance(call_id, str) else "", name, arguments)


# --- replies ----------------------------------------------------------------------------------


def call_value(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def whole_message(reply: WholeReply) -> dict[str, Any]:
    """The reply's ``message`` object: text as ``content`` (null beside calls when there is
    none), calls as ``tool_calls``."""
    if not reply.calls:
        return {"role": "assistant", "content": reply.content}
    return {
        "role": "assistant",
        "content": reply.content.strip() or None,
        "tool_calls": [call_value(call) for call in reply.calls],
    }


def call_delta(event: CallStarted | ArgumentsPiece) -> dict[str, Any]:
    """A streamed call's ``delta``: its id and name first, then its arguments in pieces."""
    if isinstance(event, CallStarted):
        function = {"name": event.name, "arguments": ""}
        start = {"index": event.index, "id": event.id, "type": "function", "function": function}
        return {"tool_calls": [start]}
    return {"tool_calls": [{"index": event.index, "function": {"arguments": event.text}}]}
