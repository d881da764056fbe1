"""Issue 34: no single request stops ``serve`` for everyone, and every refusal names its limit.

Each hostile request of :mod:`tests.server.hostile_bodies` is sent to the real server (demo model);
after each, the server must still answer ``/health`` and an ordinary chat request. A ``$ref`` chain
that used to kill the process by SIGSEGV now compiles (on a large stack, in the worker too) and is
obeyed (as a forced call's arguments, llguidance refuses it with a 400); bigger or deeper
schemas, too many tools or stop strings, a subnormal temperature, a lone surrogate or a tool name
with a newline are 400s naming the field and the limit.
"""

from __future__ import annotations

import json

import httpx2
import pytest

from app.engine.runtime.chat_format.schema_limits import MAX_SCHEMA_DEPTH, MAX_SCHEMA_VALUES
from app.engine.server.core.config import MAX_STOP_CHARACTERS, MAX_STOP_STRINGS, MAX_TOOLS
from tests.server.hostile_bodies import (
    HELLO,
    JSON_HEADERS,
    anthropic_forced_tool,
    hostile_requests,
    openai_body,
    ref_chain,
    response_format,
)
from tests.server.server_process import ServerProcess

pytestmark = pytest.mark.slow

REFUSED = {
    # compiled as a call's arguments (it used to crash the server here): llguidance's own limit
    "$ref chain 2,500 long (Anthropic tool, tool_choice any)": (400, "cannot be enforced"),
    "$ref chain 12,000 long (response_format)": (400, f"more than {MAX_SCHEMA_VALUES:,} JSON"),
    "schema nested 700 items deep": (400, f"deeper than {MAX_SCHEMA_DEPTH} levels"),
    "700 stop strings of 10 KB": (400, f"at most {MAX_STOP_STRINGS}"),
    "10,000 tools with a forced call": (400, f"at most {MAX_TOOLS} per request"),
    "200,000-member enum": (400, f"more than {MAX_SCHEMA_VALUES:,} JSON"),
    "temperature 1e-320": (400, "use 0 (greedy) or a value of at least 0.001"),
    "lone surrogate in content": (400, "'messages[0].content' holds a lone UTF-16 surrogate"),
    'tool name "f\\n"': (400, "'tools[0].function.name' must be 1-64 letters"),
    "text/plain POST (no preflight)": (415, 'Content-Type "text/plain" is not accepted'),
    "Host: rebind.attacker.example": (403, 'Host "rebind.attacker.example" is not allowed'),
}


def still_serving(server: ServerProcess) -> None:
    assert httpx2.get(f"{server.root_url}/health", timeout=5).json()["status"] == "ok"
    reply = httpx2.post(
        f"{server.base_url}/chat/completions",
        json={"messages": HELLO, "max_tokens": 2},
        timeout=60,
    )
    assert reply.status_code == 200, reply.text


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_each_hostile_request_is_refused_naming_its_limit(server: ServerProcess, name: str) -> None:
    hostile = next(request for request in hostile_requests() if request.name == name)
    response = httpx2.post(
        server.root_url + hostile.path, content=hostile.body, headers=hostile.headers, timeout=60
    )
    status, words = REFUSED[name]
    assert response.status_code == status, response.text
    assert words in response.json()["error"]["message"]
    still_serving(server)


def test_a_ref_chain_that_used_to_crash_the_server_is_obeyed(server: ServerProcess) -> None:
    body = openai_body(response_format=response_format(ref_chain(2500)), max_tokens=12)
    response = httpx2.post(
        f"{server.base_url}/chat/completions", content=body, headers=JSON_HEADERS, timeout=120
    )
    assert response.status_code == 200, response.text
    text = response.json()["choices"][0]["message"]["content"]
    assert isinstance(json.loads(text), str) and len(json.loads(text)) <= 4
    still_serving(server)


def test_stop_strings_within_the_limits_still_stop_the_reply(server: ServerProcess) -> None:
    stops = ["x" * (MAX_STOP_CHARACTERS - 3) + str(i) for i in range(MAX_STOP_STRINGS - 1)]
    stops.append("python")  # the demo model answers with a ```python block
    response = httpx2.post(
        f"{server.base_url}/chat/completions",
        json={"messages": HELLO, "max_tokens": 20, "stop": stops, "temperature": 0},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["message"]["content"] == "```"
    too_long = httpx2.post(
        f"{server.base_url}/chat/completions",
        json={"messages": HELLO, "stop": ["z" * (MAX_STOP_CHARACTERS + 1)]},
    )
    assert too_long.status_code == 400
    assert f"at most {MAX_STOP_CHARACTERS} per string" in too_long.json()["error"]["message"]


def test_refusals_take_each_apis_shape(server: ServerProcess) -> None:
    rebound = httpx2.post(
        f"{server.root_url}/v1/messages",
        content=anthropic_forced_tool({"type": "object"}),
        headers={**JSON_HEADERS, "host": "rebind.attacker.example:8080"},
    )
    assert rebound.status_code == 403
    assert rebound.json()["error"]["type"] == "permission_error"
    plain = httpx2.post(
        f"{server.root_url}/v1/messages",
        content=anthropic_forced_tool({"type": "object"}),
        headers={"content-type": "text/plain;charset=UTF-8", "host": "localhost"},
    )
    assert plain.status_code == 415
    assert plain.json()["type"] == "error"
    for host in ("localhost", "127.0.0.1", f"localhost:{server.port}", f"[::1]:{server.port}"):
        health = httpx2.get(f"{server.root_url}/health", headers={"host": host})
        assert health.status_code == 200, host
