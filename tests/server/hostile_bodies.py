"""The hostile requests of issue 34, built once for the tests and for ``bench/hostile_inputs.py``
and ``bench/health_under_attack.py``: each is what an attacker would POST, as bytes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

JSON_HEADERS = {"content-type": "application/json", "host": "localhost"}
HELLO = [{"role": "user", "content": "Hello"}]


@dataclass(frozen=True)
class HostileRequest:
    name: str
    path: str
    body: bytes
    headers: dict[str, str] = field(default_factory=lambda: dict(JSON_HEADERS))


def ref_chain(length: int) -> dict[str, Any]:
    """A schema whose ``$ref`` definitions point at each other ``length`` deep (88 KB at 2,500)."""
    definitions = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(length)}
    definitions[f"d{length}"] = {"type": "string", "maxLength": 4}
    return {"$ref": "#/$defs/d0", "$defs": definitions}


def nested_items(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return schema


def openai_body(**fields: Any) -> bytes:
    return json.dumps({"model": "demo-mtp", "messages": HELLO, "max_tokens": 4, **fields}).encode()


def response_format(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "hostile", "schema": schema}}


def anthropic_forced_tool(schema: dict[str, Any]) -> bytes:
    body = {
        "model": "demo-mtp",
        "max_tokens": 4,
        "messages": HELLO,
        "tools": [{"name": "f", "description": "d", "input_schema": schema}],
        "tool_choice": {"type": "any"},
    }
    return json.dumps(body).encode()


def many_tools(count: int) -> list[dict[str, Any]]:
    parameters = {"type": "object", "properties": {"city": {"type": "string"}}}
    return [
        {"type": "function", "function": {"name": f"tool_{i}", "parameters": parameters}}
        for i in range(count)
    ]


def huge_stops() -> list[str]:
    """700 stop strings of 10 KB, and one the demo model's reply starts with."""
    return ["x" * 10_000 + str(i) for i in range(700)] + ["```python\n" + "y" * 10_000]


def hostile_requests() -> list[HostileRequest]:
    chat, messages = "/v1/chat/completions", "/v1/messages"
    return [
        HostileRequest(
            "$ref chain 2,500 long (response_format)",
            chat,
            openai_body(response_format=response_format(ref_chain(2500))),
        ),
        HostileRequest(
            "$ref chain 2,500 long (Anthropic tool, tool_choice any)",
            messages,
            anthropic_forced_tool(ref_chain(2500)),
        ),
        HostileRequest(
            "$ref chain 12,000 long (response_format)",
            chat,
            openai_body(response_format=response_format(ref_chain(12_000))),
        ),
        HostileRequest(
            "schema nested 700 items deep",
            chat,
            openai_body(response_format=response_format(nested_items(700))),
        ),
        HostileRequest("700 stop strings of 10 KB", chat, openai_body(stop=huge_stops())),
        HostileRequest(
            "10,000 tools with a forced call",
            chat,
            openai_body(tools=many_tools(10_000), tool_choice="required"),
        ),
        HostileRequest(
            "200,000-member enum",
            chat,
            openai_body(
                response_format=response_format({"enum": [f"m{i}" for i in range(200_000)]})
            ),
        ),
        HostileRequest("temperature 1e-320", chat, openai_body(temperature=1e-320)),
        HostileRequest(
            "lone surrogate in content",
            chat,
            b'{"messages": [{"role": "user", "content": "hi \\ud800"}], "max_tokens": 2}',
        ),
        HostileRequest(
            'tool name "f\\n"',
            chat,
            openai_body(tools=[{"type": "function", "function": {"name": "f\n"}}]),
        ),
        HostileRequest(
            "text/plain POST (no preflight)",
            chat,
            openai_body(),
            {"content-type": "text/plain", "host": "localhost"},
        ),
        HostileRequest(
            "Host: rebind.attacker.example",
            chat,
            openai_body(),
            {**JSON_HEADERS, "host": "rebind.attacker.example"},
        ),
    ]
