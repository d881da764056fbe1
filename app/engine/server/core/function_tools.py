"""Function tools, tool choices and JSON-schema outputs as the runtime's values, checked by name.

Shared by the APIs: the checks that a function's name is usable and its parameters a schema
object (OpenAI's Responses API writes tools flat, chat completions nested under ``function``),
that a forced call's grammar compiles and that an output schema can be enforced — each a 400
naming the field before anything is generated.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.chat_format.constraint import (
    JSON_OBJECT_SCHEMA,
    OutputConstraint,
    json_schema_constraint,
)
from app.engine.runtime.chat_format.tools import (
    AUTO,
    NONE,
    REQUIRED,
    ToolChoice,
    ToolSpec,
    forced_call_constraint,
)
from app.engine.server.core.api_errors import bad_request
from app.engine.server.core.echo import echo
from app.engine.server.core.request_fields import check_schemas, check_tool_count

FUNCTION_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
EMPTY_PARAMETERS = {"type": "object", "properties": {}}


def function_spec(name: Any, description: Any, parameters: Any, where: str) -> ToolSpec:
    """The tool at ``where`` (``tools[2]``), its fields checked."""
    if not isinstance(name, str) or not FUNCTION_NAME.fullmatch(name):
        raise bad_request(
            f"'{where}.name' must be 1-64 letters, digits, '_', '.' or '-', got {echo(name)}",
            f"{where}.name",
        )
    if description is not None and not isinstance(description, str):
        raise bad_request(f"'{where}.description' must be a string", f"{where}.description")
    if parameters is None:
        parameters = EMPTY_PARAMETERS
    if not isinstance(parameters, dict):
        raise bad_request(
            f"'{where}.parameters' must be a JSON schema object", f"{where}.parameters"
        )
    return ToolSpec(name, description or "", json.dumps(parameters))


def function_tools(value: Any, spec_of: Callable[[Any, str], ToolSpec]) -> tuple[ToolSpec, ...]:
    """A body's ``tools``: none when absent, else an array whose items ``spec_of`` reads (each
    named by its place, ``tools[2]``), checked as :func:`checked_tools` checks them."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise bad_request("'tools' must be an array of function tools", "tools")
    check_tool_count(value)
    return checked_tools([spec_of(item, f"tools[{index}]") for index, item in enumerate(value)])


def checked_tools(tools: list[ToolSpec]) -> tuple[ToolSpec, ...]:
    """``tools`` once their parameter schemas pass the grammar compiler's size limits (checked
    whether or not they are compiled: the worker renders them into the prompt) and each name is
    given once; a 400 naming ``tools`` otherwise."""
    check_schemas([json.loads(tool.parameters) for tool in tools], "tools")
    names = [tool.name for tool in tools]
    if len(set(names)) != len(names):
        raise bad_request("'tools' names a function twice; give each function one entry", "tools")
    return tuple(tools)


def worded_tool_choice(value: Any, tools: tuple[ToolSpec, ...]) -> ToolChoice | None:
    """``tool_choice`` as both OpenAI APIs word it: absent (``auto``), ``none``, ``auto`` or
    ``required`` (a 400 when there are no tools to call); None when ``value`` is none of them
    (the API's own object naming one function)."""
    if value is None:
        return ToolChoice(AUTO)
    if value in (AUTO, NONE, REQUIRED):
        if value == REQUIRED and not tools:
            raise bad_request("'tool_choice' is 'required' but 'tools' is empty", "tool_choice")
        return ToolChoice(value)
    return None


def function_choice(name: str, tools: tuple[ToolSpec, ...], quoted: str) -> ToolChoice:
    """A ``tool_choice`` forcing a call of the function ``name`` (``quoted`` as the 400 quotes it
    when ``tools`` has no function of that name)."""
    if name not in {tool.name for tool in tools}:
        raise bad_request(
            f"'tool_choice' names the function {quoted}, which is not in 'tools'", "tool_choice"
        )
    return ToolChoice("function", name)


def tool_request_fields(
    tools: tuple[ToolSpec, ...], choice: ToolChoice, constraint: OutputConstraint | None
) -> dict[str, Any]:
    """The :class:`GenerationRequest` fields for ``tools``, ``choice`` and an output
    ``constraint``; a forced call whose grammar cannot be built is a 400. A choice that forces a
    call makes the reply that one call and no text, so an output format (which shapes text, as
    on OpenAI's API) has nothing to hold and is not applied to it."""
    fields: dict[str, Any] = {}
    if tools:
        fields.update(tools=tools, tool_choice=choice)
    if choice.forces_call:
        try:
            forced_call_constraint(tools, choice)
        except RuntimeBackendError as exc:
            raise bad_request(f"'tools': {exc}", "tools") from None
    elif constraint is not None:
        fields["constraint"] = constraint
    return fields


def schema_output(schema: Any, field: str, name: Any = None) -> OutputConstraint:
    """The reply held to ``schema`` (``None``: any JSON object), or a 400 naming ``field``."""
    if schema is None:
        return json_schema_constraint(JSON_OBJECT_SCHEMA, f"'{field}'")
    if not isinstance(schema, dict):
        raise bad_request(f"'{field}.schema' must be a JSON schema object", field)
    what = f"'{field}' ({name})" if isinstance(name, str) else f"'{field}'"
    try:
        return json_schema_constraint(schema, what)
    except RuntimeBackendError as exc:
        raise bad_request(str(exc), field) from None
