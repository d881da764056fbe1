"""Issue 34: which ``Host`` a request may name (DNS rebinding), checked on real Starlette requests:
loopback names always, names given with ``--allow-host``, anything on a server bound to another
address (which needs an API key no web page has)."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from app.engine.server.core.api_errors import ApiError
from app.engine.server.core.config import ServerConfig
from app.engine.server.core.request_guard import check_host, host_name


def request_for(host: str) -> Request:
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/chat/completions",
        "headers": [(b"host", host.encode())],
        "server": ("127.0.0.1", 8080),
    }
    return Request(scope)


def config(**fields: object) -> ServerConfig:
    return ServerConfig(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "host",
    ["localhost", "LOCALHOST:8080", "localhost.", "127.0.0.1:8080", "127.9.9.9", "[::1]:8080"],
)
def test_loopback_names_are_allowed(host: str) -> None:
    check_host(request_for(host), config())


@pytest.mark.parametrize(
    "host", ["rebind.attacker.example", "localhost.attacker.example", "127.0.0.1.nip.io:8080"]
)
def test_other_names_are_refused_on_a_loopback_server(host: str) -> None:
    with pytest.raises(ApiError) as refused:
        check_host(request_for(host), config())
    assert refused.value.status == 403 and "http://localhost:8080" in refused.value.message


def test_allow_host_and_non_loopback_servers() -> None:
    check_host(request_for("llm.internal:443"), config(allowed_hosts=("LLM.internal",)))
    with pytest.raises(ApiError):
        check_host(request_for("other.internal"), config(allowed_hosts=("llm.internal",)))
    check_host(request_for("anything.example"), config(host="0.0.0.0", api_key="k" * 16))


def test_host_names_lose_their_port_brackets_and_final_dot() -> None:
    assert host_name("[::1]:8080") == "::1"
    assert host_name("Example.COM.:80") == "example.com"
    assert host_name("::1") == "::1"
