"""Slow and idle clients cannot hold the server: a read deadline and a bounded number of
connections, per client and in all.

Why: uvicorn times out only idle keep-alive connections. About 1,020 connections that send their
headers and half a body each used up the process's file descriptors, so nobody could connect,
and asyncio's accept loop then logged one traceback per spin (161 MB in 2 minutes). So each
connection here (uvicorn's h11 protocol, subclassed through ``uvicorn.Config(http=...)``) must
deliver its whole request — headers and body — within ``read_seconds`` of opening or of its
previous reply, or it is closed (408 while the headers are incomplete). At most
``per_client`` connections per client address and ``total`` in all stay open; a connection past a
cap first takes the place of the oldest one still *reading* (sending a request, or idle between
requests), so a flood of slow connections never locks out a client that sends its request at once
(``/health`` keeps answering); only when every connection is busy with a reply is the new one
refused with a 503. :func:`quiet_accept_errors` turns any remaining accept failure into one line a
minute instead of a traceback per attempt.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

ACCEPT_ERROR_INTERVAL_SECONDS = 60.0


@dataclass(frozen=True)
class ConnectionLimits:
    read_seconds: float
    """How long a client may take to send one request, headers and body."""
    per_client: int
    total: int


class ConnectionGuard:
    """The open connections, oldest first, by client address."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self._open: dict[str, dict[GuardedH11Protocol, int]] = {}
        self._order = itertools.count()

    @property
    def total(self) -> int:
        return sum(len(connections) for connections in self._open.values())

    def admit(self, connection: GuardedH11Protocol) -> bool:
        """Make room for ``connection`` (closing the oldest reading one past a cap); False when
        no room can be made."""
        mine = self._open.setdefault(connection.client_address, {})
        if len(mine) >= self.limits.per_client and not self._evict_oldest([mine]):
            return False
        if self.total >= self.limits.total and not self._evict_oldest(self._open.values()):
            return False
        mine[connection] = next(self._order)
        return True

    def forget(self, connection: GuardedH11Protocol) -> None:
        mine = self._open.get(connection.client_address, {})
        mine.pop(connection, None)
        if not mine:
            self._open.pop(connection.client_address, None)

    def _evict_oldest(self, groups: Iterable[dict[GuardedH11Protocol, int]]) -> bool:
        candidates = [
            (order, connection)
            for group in groups
            for connection, order in group.items()
            if connection.reading
        ]
        if not candidates:
            return False
        _, oldest = min(candidates, key=lambda candidate: candidate[0])
        oldest.close_slow("the server needed the connection for another client")
        self.forget(oldest)
        return True


class GuardedH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a read deadline, admitted by :attr:`guard` (set on the
    subclass :func:`guarded_protocol` makes)."""

    guard: ConnectionGuard

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self.client_address = ""

    @property
    def reading(self) -> bool:
        """True while the client owes a request (headers or body), or idles between requests."""
        cycle = self.cycle
        return cycle is None or cycle.response_complete or cycle.more_body

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.client_address = self.client[0] if self.client else ""
        if not self.guard.admit(self):
            _write_raw(transport, 503, "the server has too many open connections; retry later")
            transport.close()
            return
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.guard.forget(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if not self.reading:  # the whole request is in: the reply may take its time
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()

    def close_slow(self, why: str) -> None:
        """Close a connection that owes its request: a 408 saying ``why`` while no request has
        begun (a half-sent body cannot be answered: the connection just closes)."""
        self._disarm()
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            _write_raw(self.transport, 408, why)
        self.transport.close()

    def _arm(self) -> None:
        if self._deadline is None and not self.transport.is_closing():
            seconds = self.guard.limits.read_seconds
            self._deadline = self.loop.call_later(seconds, self._expire)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if self.reading:
            seconds = self.guard.limits.read_seconds
            self.close_slow(f"the request did not arrive within {seconds:g} s")


def guarded_protocol(guard: ConnectionGuard) -> type[GuardedH11Protocol]:
    """The protocol class to give ``uvicorn.Config(http=...)``, admitting through ``guard``."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"guard": guard})


def _write_raw(transport: asyncio.BaseTransport, status: int, message: str) -> None:
    """A whole reply written before (or instead of) HTTP parsing, in OpenAI's error shape."""
    reason = {408: "Request Timeout", 503: "Service Unavailable"}[status]
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    assert isinstance(transport, asyncio.WriteTransport)
    transport.write(head.encode() + body)


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """Report a failing ``accept()`` (out of file descriptors) on one line a minute, without a
    traceback; every other loop error goes to the default handler."""
    last_reported = [-ACCEPT_ERROR_INTERVAL_SECONDS]

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if "accept" not in str(context.get("message", "")):
            loop.default_exception_handler(context)
            return
        now = time.monotonic()
        if now - last_reported[0] >= ACCEPT_ERROR_INTERVAL_SECONDS:
            last_reported[0] = now
            print(
                f"mtp-studio serve: cannot accept connections: {context.get('exception')} "
                f"(reported once a minute)",
                file=sys.stderr,
                flush=True,
            )

    loop.set_exception_handler(handle)
