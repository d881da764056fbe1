"""A real HTTP server for one file, with the faults a download must survive.

Used until (and alongside) the local hub: it lets a test drop the connection after N bytes,
ignore ``Range``, answer 503 a few times, or stall, and it records every ``Range`` asked for and
every byte sent, so tests can prove a resume fetched only the missing bytes.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Faults:
    drop_after_bytes: int | None = None  # close the connection once this many bytes were sent
    drops_left: int = 0
    ignore_range: bool = False
    errors_left: int = 0  # answer 503 this many times first
    seconds_per_chunk: float = 0.0  # throttle, so a test can act mid-download


@dataclass
class Served:
    ranges: list[str | None] = field(default_factory=list)
    bytes_sent: int = 0


class RangeServer:
    """Serves ``content`` at ``/file`` on 127.0.0.1 (a free port)."""

    def __init__(self, content: bytes, chunk: int = 64 * 1024) -> None:
        self.content = content
        self.chunk = chunk
        self.faults = Faults()
        self.served = Served()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/file"

    def __enter__(self) -> RangeServer:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: object) -> None:
                pass

            def do_GET(self) -> None:
                asked = self.headers.get("Range")
                with server._lock:
                    server.served.ranges.append(asked)
                    faults = server.faults
                    if faults.errors_left:
                        faults.errors_left -= 1
                        self.send_error(503, "try later")
                        return
                    drop_at = None
                    if faults.drops_left and faults.drop_after_bytes is not None:
                        faults.drops_left -= 1
                        drop_at = faults.drop_after_bytes
                content = server.content
                start = 0
                match = re.fullmatch(r"bytes=(\d+)-", asked or "")
                if match and not faults.ignore_range:
                    start = int(match.group(1))
                    if start >= len(content):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(content)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header(
                        "Content-Range", f"bytes {start}-{len(content) - 1}/{len(content)}"
                    )
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(content) - start))
                self.end_headers()
                sent = 0
                for offset in range(start, len(content), server.chunk):
                    piece = content[offset : offset + server.chunk]
                    if drop_at is not None and sent + len(piece) > drop_at:
                        piece = piece[: drop_at - sent]
                        self.wfile.write(piece)
                        server._count(len(piece))
                        self.close_connection = True
                        return
                    self.wfile.write(piece)
                    sent += len(piece)
                    server._count(len(piece))
                    if faults.seconds_per_chunk:
                        time.sleep(faults.seconds_per_chunk)

        return Handler

    def _count(self, amount: int) -> None:
        with self._lock:
            self.served.bytes_sent += amount
