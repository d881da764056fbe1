"""Anthropic's tool fields as the runtime's wire-independent values, and calls as ``tool_use``.

``tools`` (``name``, ``description``, ``input_schema``) become :class:`ToolSpec`\\ s and
``tool_choice`` (``{"type": "auto" | "any" | "none"}`` or ``{"type": "tool", "name": ...}``) a
:class:`ToolChoice`: the same values the OpenAI path makes
(:mod:`~app.engine.server.openai.tool_fields`), so both APIs render tools through the model's chat
template and force a call with the same grammar (``any`` and ``tool`` are enforced while decoding,
so even a small model's ``input`` validates). A call the model made goes back as a ``tool_use``
block (``toolu_…`` id, name, ``input`` object). Anthropic's server tools (web search, code
execution, …) are refused with a 400 naming the tool: this server runs none of them.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from app.engine.errors import RuntimeBackendError
from app.engine.runtime import ToolCall, ToolChoice, ToolSpec
from app.engine.runtime.chat_format.tools import AUTO, NONE, REQUIRED, forced_call_constraint
from app.engine.server.core.api_errors import bad_request
from app.engine.server.core.echo import echo
from app.engine.server.core.request_fields import check_schemas, check_tool_count

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,128}")
CUSTOM_TOOL_TYPES = (None, "custom")
_CHOICE_MODES = {"auto": AUTO, "any": REQUIRED, "none": NONE}
TOOL_USE_REASON = "tool_use"
PARTIAL_TRIM_CHARACTERS = 64


def tool_fields(body: dict[str, Any]) -> dict[str, Any]:
    """The :class:`GenerationRequest` fields for the body's ``tools`` and ``tool_choice`` (none
    when it offers no tools); a forced call whose schema cannot be compiled is a 400 here."""
    tools = _tools(body.get("tools"))
    choice = _tool_choice(body.get("tool_choice"), tools)
    if not tools:
        return {}
    if choice.forces_call:
        try:
            forced_call_constraint(tools, choice)
        except RuntimeBackendError as exc:
            raise bad_request(f"'tools': {exc}", "tools") from None
    return {"tools": tools, "tool_choice": choice}


def _tools(value: Any) -> tuple[ToolSpec, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise bad_request("'tools' must be an array of tools", "tools")
    check_tool_count(value)
    tools = [_tool(item, f"tools[{index}]") for index, item in enumerate(value)]
    check_schemas([item["input_schema"] for item in value], "tools")
    names = [tool.name for tool in tools]
    if len(set(names)) != len(names):
        raise bad_request("'tools' names a tool twice; give each tool one entry", "tools")
    return tuple(tools)


def _tool(item: Any, where: str) -> ToolSpec:
    if not isinstance(item, dict):
        raise bad_request(
            f"'{where}' must be an object with 'name', 'description' and 'input_schema'", where
        )
    if item.get("type") not in CUSTOM_TOOL_TYPES:
        raise bad_request(
            f"'{where}' is Anthropic's server tool {echo(item.get('type'))}, which this server "
            "does not run: offer it as a custom tool (name, description, input_schema)",
            where,
        )
    name = item.get("name")
    if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
        raise bad_request(
            f"'{where}.name' must be 1-128 letters, digits, '_' or '-', got {echo(name)}",
            f"{where}.name",
        )
    description = item.get("description") or ""
    if not isinstance(description, str):
        raise bad_request(f"'{where}.description' must be a string", f"{where}.description")
    schema = item.get("input_schema")
    if not isinstance(schema, dict):
        raise bad_request(
            f"'{where}.input_schema' must be a JSON schema object, e.g. "
            '{"type": "object", "properties": {...}}',
            f"{where}.input_schema",
        )
    return ToolSpec(name, description, json.dumps(schema))


def _tool_choice(value: Any, tools: tuple[ToolSpec, ...]) -> ToolChoice:
    if value is None:
        return ToolChoice(AUTO)
    kind = value.get("type") if isinstance(value, dict) else None
    if isinstance(kind, str) and kind in _CHOICE_MODES:
        choice = ToolChoice(_CHOICE_MODES[kind])
    elif kind == "tool" and isinstance(value.get("name"), str):
        if value["name"] not in {tool.name for tool in tools}:
            raise bad_request(
                f"'tool_choice' names the tool {echo(value['name'])}, which is not in 'tools'",
                "tool_choice",
            )
        choice = ToolChoice("function", value["name"])
    else:
        raise bad_request(
            '\'tool_choice\' must be {"type": "auto"}, {"type": "any"}, {"type": "none"} or '
            f'{{"type": "tool", "name": ...}}, got {echo(value)}',
            "tool_choice",
        )
    if choice.forces_call and not tools:
        raise bad_request(f"'tool_choice' is {echo(value)} but 'tools' is empty", "tool_choice")
    return choice


def new_tool_use_id() -> str:
    return f"toolu_{uuid.uuid4().hex[:24]}"


def tool_use_block(call: ToolCall, tool_use_id: str) -> dict[str, Any]:
    """The ``tool_use`` content block of a call the model made (a call the length limit cut
    off holds the input written so far)."""
    try:
        input_value = json.loads(call.arguments)  # whole calls' arguments are json.dumps'
    except ValueError:
        input_value = partial_input(call.arguments)
    if not isinstance(input_value, dict):
        input_value = {}
    return {"type": "tool_use", "id": tool_use_id, "name": call.name, "input": input_value}


def partial_input(arguments: str) -> dict[str, Any]:
    """The members a cut-off call's JSON text completed, as the object Anthropic's ``input``
    must be: the text closed (open string, objects, arrays) after dropping up to
    :data:`PARTIAL_TRIM_CHARACTERS` characters of an unfinished key or value; ``{}`` failing
    that."""
    for cut in range(min(len(arguments), PARTIAL_TRIM_CHARACTERS) + 1):
        try:
            value = json.loads(_closed(arguments[: len(arguments) - cut]))
        except ValueError:
            continue
        return value if isinstance(value, dict) else {}
    return {}


def _closed(text: str) -> str:
    """``text`` with its open string, arrays and objects closed."""
    closers: list[str] = []
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            closers.append("}" if char == "{" else "]")
        elif char in "}]" and closers:
            closers.pop()
    return text + ('"' if in_string else "") + "".join(reversed(closers))
