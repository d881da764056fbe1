"""An OpenAI-compatible endpoint that lies, for ``chat --endpoint`` (issue 34): a real HTTP
server on a free port whose ``/v1/models`` is sane and whose streamed chat reply is one of
:data:`REPLIES` — a wrong type, a statistic that is not a count, events nested deeper than any
parser goes, or one line of gigabytes without a newline.

``python -m tests.remote.hostile_endpoint CASE`` serves one case until killed and prints its URL
(``bench/hostile_inputs.py`` runs the CLI against it).
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Chunks = Callable[[], Iterator[bytes]]


def _events(*events: object) -> Chunks:
    def chunks() -> Iterator[bytes]:
        for event in events:
            text = event if isinstance(event, str) else json.dumps(event)
            yield f"data: {text}\n\n".encode()
        yield b"data: [DONE]\n\n"

    return chunks


def _hello(**last: object) -> Chunks:
    return _events(
        {"choices": [{"delta": {"content": "Hello"}, "finish_reason": None}]},
        {"choices": [{"delta": {}, "finish_reason": "stop"}], **last},
    )


def _endless_line(total_bytes: int) -> Chunks:
    def chunks() -> Iterator[bytes]:
        yield b'data: {"choices": [{"delta": {"content": "'
        piece = b"x" * 2**20
        for _ in range(total_bytes // len(piece)):
            yield piece

    return chunks


REPLIES: dict[str, Chunks] = {
    "choices is 5": _events({"choices": 5}),
    'drafted_by_depth ["x"]': _hello(
        mtp={"drafted_by_depth": ["x"], "accepted_by_depth": [1], "decode_tokens_per_second": "x"}
    ),
    "drafted_by_depth [1e999]": _hello(
        mtp={"drafted_by_depth": [1e999], "accepted_by_depth": [1]},
        usage={"prompt_tokens": "many", "completion_tokens": -3},
    ),
    "timings draft_n NaN": _hello(timings={"draft_n": float("nan"), "predicted_per_second": 1e999}),
    "nested data: line": _events("[" * 100_000 + "]" * 100_000),
    "error that is a list": _events({"error": [[["deep"]]]}),
    "6 GB line without a newline": _endless_line(6 * 2**30),
}


class _Handler(BaseHTTPRequestHandler):
    reply: Chunks

    def do_GET(self) -> None:
        body = json.dumps({"object": "list", "data": [{"id": "liar", "object": "model"}]})
        self._send(200, "application/json", [body.encode()])

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self._send(200, "text/event-stream", self.reply())

    def _send(self, status: int, content_type: str, chunks: Iterator[bytes] | list[bytes]) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("connection", "close")
        self.end_headers()
        with contextlib.suppress(OSError):  # the client hung up on a reply it refused
            for chunk in chunks:
                self.wfile.write(chunk)

    def log_message(self, *_args: object) -> None:
        pass


@contextlib.contextmanager
def hostile_endpoint(case: str) -> Iterator[str]:
    """Serve ``case`` of :data:`REPLIES`; yields the base URL (``…/v1``)."""
    handler = type("Handler", (_Handler,), {"reply": staticmethod(REPLIES[case])})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    with hostile_endpoint(sys.argv[1]) as url:
        print(url, flush=True)
        threading.Event().wait()
