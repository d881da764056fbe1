"""HTTP/1.1 plumbing shared by the local hub's two servers: routing, bodies, ranges, faults, counts.

Why: the real client keeps connections alive, streams uploads of gigabytes, sends Range requests
and expects the Hub's error headers; every route needs the same careful handling of those, and
every response must be counted and be interruptible by an injected fault. Route modules only
describe what to answer.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from tests.localhub.auth import Identity
from tests.localhub.context import HubContext
from tests.localhub.errors import HubReply
from tests.localhub.traffic import RequestRecord

CHUNK = 1024 * 1024
MAX_SMALL_BODY = 64 * 1024 * 1024
DRAIN_LIMIT = 1024 * 1024

Route = tuple[str, re.Pattern[str], Callable[..., None]]


class ConnectionDropped(Exception):
    """Raised inside a handler to cut the connection on purpose (an injected fault)."""


class HubServer(ThreadingHTTPServer):
    """A threading HTTP server that knows its hub context and its routes."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(
        self, address: tuple[str, int], context: HubContext, origin: str, routes: list[Route]
    ) -> None:
        self.context = context
        self.origin = origin
        self.routes = routes
        super().__init__(address, HubHandler)


class HubHandler(BaseHTTPRequestHandler):
    """One connection; each request is routed to a function ``fn(handler, **url_parts)``."""

    protocol_version = "HTTP/1.1"
    server: HubServer

    def do_GET(self) -> None:
        self._dispatch()

    do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_GET

    @property
    def hub(self) -> HubContext:
        return self.server.context

    # -- request ---------------------------------------------------------------------------

    def _dispatch(self) -> None:
        self.hub.traffic.begin()
        self.sent = 0
        self.received = 0
        self.status = 0
        self.repo_id: str | None = None
        self.file_path: str | None = None
        self._headers_done = False
        self._remaining = 0
        self._chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
        self.body_length: int | None = None
        split = urlsplit(self.path)
        self.query_lists = parse_qs(split.query)
        self.query = {key: values[-1] for key, values in self.query_lists.items()}
        dropped = False
        try:
            self._remaining = self._declared_length()
            self.body_length = None if self._chunked else self._remaining
            slow = self.hub.faults.take("slow", split.path)
            if slow:
                time.sleep(slow.delay_s)
            self._route(split.path)
        except HubReply as reply:
            self._send_reply(reply)
        except ConnectionDropped:
            dropped = True
            self._abort_connection()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            if not dropped:
                self._finish_body()
            self.hub.traffic.record(
                RequestRecord(
                    origin=self.server.origin,
                    method=self.command,
                    path=self.path,
                    status=self.status,
                    bytes_sent=self.sent,
                    bytes_received=self.received,
                    repo_id=self.repo_id,
                    file_path=self.file_path,
                    byte_range=self.headers.get("Range"),
                    dropped=dropped,
                    had_authorization="authorization" in {k.lower() for k in self.headers},
                )
            )

    def _route(self, path: str) -> None:
        for method, pattern, handler in self.server.routes:
            match = pattern.fullmatch(path)
            wanted = "GET" if self.command == "HEAD" else self.command
            if match and method == wanted:
                handler(
                    self, **{k: unquote(v) for k, v in match.groupdict().items() if v is not None}
                )
                return
        raise HubReply(404, f"No route for {self.command} {path}")

    def identity(self) -> Identity | None:
        return self.hub.policy.identify(self.headers.get("Authorization"))

    def _declared_length(self) -> int:
        try:
            return int(self.headers.get("Content-Length", "0"))
        except ValueError:
            raise HubReply(400, "Content-Length is not a number") from None

    def iter_body(self, chunk_size: int = CHUNK, drop_after: int | None = None) -> Iterator[bytes]:
        """The request body, streamed; cut the connection after ``drop_after`` bytes if set."""
        source = self._iter_chunked() if self._chunked else self._iter_sized(chunk_size)
        for chunk in source:
            if drop_after is not None and self.received + len(chunk) >= drop_after:
                self.received = drop_after
                raise ConnectionDropped
            self.received += len(chunk)
            yield chunk

    def _iter_sized(self, chunk_size: int) -> Iterator[bytes]:
        while self._remaining > 0:
            chunk = self.rfile.read(min(chunk_size, self._remaining))
            if not chunk:
                raise ConnectionResetError("client closed the connection mid-body")
            self._remaining -= len(chunk)
            yield chunk

    def _iter_chunked(self) -> Iterator[bytes]:
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                self._chunked = False
                return
            chunk = self.rfile.read(size)
            self.rfile.readline()
            yield chunk

    def read_body(self) -> bytes:
        if self._remaining > MAX_SMALL_BODY:
            raise HubReply(413, "request body too large for this endpoint")
        return b"".join(self.iter_body())

    def read_json(self) -> dict:
        try:
            value = json.loads(self.read_body() or b"{}")
        except json.JSONDecodeError as exc:
            raise HubReply(400, f"body is not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise HubReply(400, "body must be a JSON object")
        return value

    def read_form(self) -> dict[str, list[str]]:
        return parse_qs(self.read_body().decode())

    def _finish_body(self) -> None:
        """Drain a small unread body so the connection can be reused, else close it."""
        if self._chunked or self._remaining > DRAIN_LIMIT:
            self.close_connection = True
            return
        try:
            for _ in self.iter_body():
                pass
        except (ConnectionDropped, OSError):
            self.close_connection = True

    # -- response --------------------------------------------------------------------------

    def start(self, status: int, headers: dict[str, str]) -> None:
        self.status = status
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self._headers_done = True

    def send_bytes(
        self,
        body: bytes,
        status: int = 200,
        content_type: str = "application/octet-stream",
        headers: dict[str, str] | None = None,
    ) -> None:
        all_headers = {"Content-Type": content_type, "Content-Length": str(len(body))}
        all_headers.update(headers or {})
        self.start(status, all_headers)
        if self.command != "HEAD" and body:
            self.wfile.write(body)
            self.sent += len(body)

    def send_json(
        self,
        value: object,
        status: int = 200,
        headers: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> None:
        self.send_bytes(json.dumps(value).encode(), status, content_type, headers)

    def _send_reply(self, reply: HubReply) -> None:
        if self._headers_done:
            self.close_connection = True
            return
        self.file_path = None  # an error body is not file content
        headers = dict(reply.headers)
        if reply.code:
            headers["X-Error-Code"] = reply.code
        headers["X-Error-Message"] = reply.message.replace("\n", " ")
        self.send_json(reply.body or {"error": reply.message}, reply.status, headers)

    def send_file(
        self,
        path: Path,
        headers: dict[str, str],
        *,
        repo_id: str,
        file_path: str,
    ) -> None:
        """Send a stored file, honouring Range (206/416) and the download faults."""
        self.repo_id, self.file_path = repo_id, file_path
        subject = f"{repo_id}/{file_path}"
        size = path.stat().st_size
        start, end, status = 0, size - 1, 200
        requested = self.headers.get("Range")
        if requested and not self.hub.faults.take("ignore_range", subject):
            parsed = parse_range(requested, size)
            if parsed == "unsatisfiable":
                raise HubReply(
                    416,
                    f"Range {requested} not satisfiable for {size} bytes",
                    headers={"Content-Range": f"bytes */{size}"},
                )
            if parsed is not None:
                start, end = parsed
                status = 206
                headers = {**headers, "Content-Range": f"bytes {start}-{end}/{size}"}
        length = max(0, end - start + 1)
        self.start(
            status,
            {
                "Content-Type": "application/octet-stream",
                "Accept-Ranges": "bytes",
                "Content-Length": str(length),
                **headers,
            },
        )
        if self.command == "HEAD":
            return
        drop = self.hub.faults.take("drop_download", subject, body_size=length)
        with open(path, "rb") as source:
            if drop is None:
                self.sent += self.connection.sendfile(source, start, length) if length else 0
                return
            source.seek(start)
            budget = min(length, drop.after_bytes)
            while self.sent < budget:
                chunk = source.read(min(CHUNK, budget - self.sent))
                self.wfile.write(chunk)
                self.sent += len(chunk)
        raise ConnectionDropped

    def _abort_connection(self) -> None:
        """Close the connection mid-message, the way a network failure looks to a client.

        What was already written still arrives (a download ends short); an upload's unread
        bytes make the client's next write fail.
        """
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def log_message(self, format: str, *args: object) -> None:
        if self.hub.verbose:
            super().log_message(format, *args)


def parse_range(header: str, size: int) -> tuple[int, int] | str | None:
    """``bytes=a-b`` / ``bytes=a-`` / ``bytes=-n`` → inclusive (start, end); None to ignore it."""
    match = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", header)
    if not match or match.group(1) == match.group(2) == "":
        return None
    first, last = match.groups()
    if first == "":
        start, end = max(0, size - int(last)), size - 1
    else:
        start = int(first)
        end = min(int(last), size - 1) if last else size - 1
        if last and int(last) < start:
            return None
    if start >= size:
        return "unsatisfiable"
    return start, end
