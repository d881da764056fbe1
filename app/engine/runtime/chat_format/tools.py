"""Tools a model may call, the calls it made, and the grammar that forces a call.

Plain data independent of any wire format, so the OpenAI and Anthropic APIs share them. Calls
are written in the Hermes/Qwen format, ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n
</tool_call>``: what Qwen's templates (the demo model's family) teach, and what a template without
tool support is taught by a system note (``prompting``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from app.engine.runtime.chat_format.constraint import (
    JSON_LAYOUT,
    OutputConstraint,
    closed_objects,
    lark_constraint,
)
from app.engine.runtime.chat_format.schema_limits import check_schema_size

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"
AUTO, NONE, REQUIRED = "auto", "none", "required"


@dataclass(frozen=True)
class ToolSpec:
    """A function the model may call: ``parameters`` is its arguments' JSON schema (as JSON)."""

    name: str
    description: str
    parameters: str

    def as_template_value(self) -> dict[str, Any]:
        """The OpenAI-style ``{"type": "function", "function": {...}}`` HF templates expect."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": json.loads(self.parameters),
            },
        }


@dataclass(frozen=True)
class ToolCall:
    """One call: ``arguments`` is a JSON object as text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolChoice:
    """``mode`` auto (the model decides), none (no call), required (at least one call) or
    function (a call to ``function``)."""

    mode: str = AUTO
    function: str | None = None

    @property
    def forces_call(self) -> bool:
        return self.mode in (REQUIRED, "function")


def forced_call_constraint(
    tools: Sequence[ToolSpec], choice: ToolChoice, marker: Callable[[str], str] = json.dumps
) -> OutputConstraint | None:
    """The grammar of one call whose arguments match the tool's schema, when ``choice`` forces
    a call (None otherwise). ``marker`` writes ``<tool_call>``/``</tool_call>`` as a grammar
    terminal: a quoted string, or the model's special token where it has one."""
    if not choice.forces_call:
        return None
    chosen = [tool for tool in tools if choice.mode == REQUIRED or tool.name == choice.function]
    what = f"the call to {choice.function!r}" if choice.function else "a tool call"
    check_schema_size((json.loads(tool.parameters) for tool in chosen), what)
    alternatives = " | ".join(f"call_{index}" for index in range(len(chosen)))
    rules = [
        f'start: {marker(CALL_OPEN)} "\\n" ({alternatives}) "\\n" {marker(CALL_CLOSE)}',
    ]
    for index, tool in enumerate(chosen):
        opening = json.dumps(f'{{"name": {json.dumps(tool.name)}, "arguments": ')
        rules.append(f'call_{index}: {opening} args_{index} "}}"')
        rules.append(f"args_{index}: %json {_object_schema(tool.parameters)}")
    return lark_constraint("\n".join(rules), what)


def _object_schema(parameters: str) -> str:
    """Arguments are always a JSON object, even where a tool's schema leaves the type out, laid
    out as :data:`JSON_LAYOUT` says, with :func:`closed_objects`."""
    schema = closed_objects(json.loads(parameters))
    if isinstance(schema, dict):
        schema = {"type": "object", **schema, "x-guidance": JSON_LAYOUT}
    return json.dumps(schema)
