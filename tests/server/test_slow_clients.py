"""Issue 34: slow or idle clients cannot lock others out of the server.

The connection guard (:mod:`app.engine.server.core.connections`) runs in real uvicorn over real
sockets: first around a small Starlette app with short limits (a 1 s read deadline, 8 connections
per client), then in ``serve`` itself: hundreds of connections that send their headers and half a
body leave ``/health`` answering, and a server out of file descriptors says so on one line instead
of a traceback per attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.engine.server.core.connections import ConnectionGuard, ConnectionLimits, guarded_protocol
from tests.server.server_process import ServerProcess, running_server

pytestmark = pytest.mark.slow

HALF_REQUEST = (
    b"POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    b'Content-Length: 1000\r\n\r\n{"half": '
)
LIMITS = ConnectionLimits(read_seconds=1.0, per_client=8, total=16)


@contextlib.contextmanager
def guarded_server(release: threading.Event) -> Iterator[int]:
    """A uvicorn server with the guard: ``/health``, ``POST /echo`` (reads the body) and
    ``/hold`` (answers once ``release`` is set); yields its port."""

    async def health(_request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def echo(request: Request) -> Response:
        try:
            return JSONResponse({"bytes": len(await request.body())})
        except ClientDisconnect:
            return Response(status_code=499)

    async def hold(_request: Request) -> Response:
        while not release.is_set():
            await asyncio.sleep(0.05)
        return JSONResponse({"released": True})

    app = Starlette(
        routes=[
            Route("/health", health),
            Route("/echo", echo, methods=["POST"]),
            Route("/hold", hold),
        ]
    )
    listener = socket.create_server(("127.0.0.1", 0))
    config = uvicorn.Config(
        app, http=guarded_protocol(ConnectionGuard(LIMITS)), log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    try:
        yield listener.getsockname()[1]
    finally:
        release.set()
        server.should_exit = True
        thread.join(timeout=10)


def stalled(port: int, data: bytes = HALF_REQUEST) -> socket.socket:
    connection = socket.create_connection(("127.0.0.1", port), timeout=5)
    connection.sendall(data)
    return connection


def closed_by_server(connection: socket.socket, within: float) -> bytes | None:
    """What the server sent before closing ``connection`` (None if it stayed open)."""
    connection.settimeout(within)
    received = b""
    try:
        while chunk := connection.recv(4096):
            received += chunk
    except TimeoutError:
        return None
    except ConnectionResetError:  # closed with our unread bytes in its buffer
        pass
    return received


def read_until(connection: socket.socket, marker: bytes, within: float) -> bool:
    connection.settimeout(within)
    received = b""
    with contextlib.suppress(TimeoutError):
        while marker not in received and (chunk := connection.recv(4096)):
            received += chunk
    return marker in received


def test_slow_connections_make_room_for_a_client_that_sends_its_request() -> None:
    with guarded_server(threading.Event()) as port:
        slow = [stalled(port) for _ in range(40)]
        health = httpx2.get(f"http://127.0.0.1:{port}/health", timeout=5)
        assert health.json() == {"status": "ok"}
        evicted = [closed_by_server(connection, 0.5) for connection in slow[:30]]
        assert all(received is not None for received in evicted), "the oldest were closed"
        echoed = httpx2.post(f"http://127.0.0.1:{port}/echo", json={"a": 1}, timeout=5)
        assert echoed.json() == {"bytes": len(b'{"a":1}')}
        for connection in slow:
            connection.close()


def test_a_request_that_does_not_arrive_in_time_is_closed_with_a_408() -> None:
    with guarded_server(threading.Event()) as port:
        half_headers = stalled(port, b"GET /health HTTP/1.1\r\nHost: loc")
        silent = stalled(port, b"")
        half_body = stalled(port)
        started = time.monotonic()
        for connection in (half_headers, silent):
            received = closed_by_server(connection, 5)
            assert received is not None and received.startswith(b"HTTP/1.1 408 ")
            assert b"did not arrive within 1 s" in received
        assert closed_by_server(half_body, 5) == b"", "a half-sent body: closed without reply"
        assert time.monotonic() - started < 4


def test_when_every_connection_is_busy_a_new_one_gets_a_503() -> None:
    release = threading.Event()
    with guarded_server(release) as port:
        busy = [stalled(port, b"GET /hold HTTP/1.1\r\nHost: localhost\r\n\r\n") for _ in range(8)]
        time.sleep(0.3)  # each request is in: none of them is still reading
        refused = closed_by_server(stalled(port, b""), 5)
        assert refused is not None and refused.startswith(b"HTTP/1.1 503 ")
        assert b"too many open connections" in refused
        release.set()
        for connection in busy:
            assert read_until(connection, b'{"released":true}', 5)
            connection.close()
        health = httpx2.get(f"http://127.0.0.1:{port}/health", timeout=5)
        assert health.status_code == 200


def test_serve_keeps_answering_under_hundreds_of_half_sent_requests(
    server: ServerProcess,
) -> None:
    slow = [
        stalled(server.port, HALF_REQUEST.replace(b"/echo", b"/v1/messages")) for _ in range(300)
    ]
    try:
        health = httpx2.get(f"{server.root_url}/health", timeout=10)
        assert health.json()["status"] == "ok"
        reply = httpx2.post(
            f"{server.base_url}/chat/completions",
            json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2},
            timeout=60,
        )
        assert reply.status_code == 200
    finally:
        for connection in slow:
            connection.close()


def test_a_server_out_of_file_descriptors_says_so_once_not_per_attempt(tmp_path: Path) -> None:
    def few_descriptors() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (96, 96))

    with running_server(home=tmp_path, preexec_fn=few_descriptors) as serve:
        connections = []
        for _ in range(150):  # more than the process may open
            with contextlib.suppress(OSError):
                connections.append(stalled(serve.port, b""))
        time.sleep(3)
        for connection in connections:
            connection.close()
        time.sleep(1.5)
        health = httpx2.get(f"{serve.root_url}/health", timeout=10)
        assert health.status_code == 200
        log = "".join(serve.lines)
        assert "Traceback" not in log
        reports = [line for line in serve.lines if "cannot accept connections" in line]
        assert 1 <= len(reports) <= 2, log[-2000:]
        assert "Too many open files" in reports[0]
