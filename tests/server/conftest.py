"""The `serve` processes the server tests share: an open one with the default settings (auto MTP
depth), and a keyed one with a queue of 1; each keeps its app folders in a temporary home."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.server_process import ServerProcess, running_server
from tests.vision.conftest import picture

API_KEY = "test-key-0123456789"
CORS_ORIGIN = "http://localhost:3000"
CLAUDE_NAMES = "claude-*"
"""The shared server answers Claude Code's own model names, as a Claude Code user starts it."""
PICTURE = picture(48, 32)
"""What :func:`picture_site` serves at /cat.png."""


@pytest.fixture(scope="session")
def server_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("serve-home")


@pytest.fixture(scope="session")
def server(server_home: Path) -> Iterator[ServerProcess]:
    with running_server("--alias", CLAUDE_NAMES, home=server_home) as process:
        yield process


@pytest.fixture(scope="session")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    home = tmp_path_factory.mktemp("keyed-serve-home")
    with running_server(
        "--api-key", API_KEY, "--queue-size", "1", "--alias", CLAUDE_NAMES, home=home
    ) as process:
        yield process


@pytest.fixture(scope="session")
def limits_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A 1024-token context (replies without max_tokens fill it quickly), a 1 MiB body cap, one
    allowed browser origin and a queue of one."""
    home = tmp_path_factory.mktemp("limits-serve-home")
    args = ("--ctx", "1024", "--max-body-mib", "1", "--cors", CORS_ORIGIN, "--queue-size", "1")
    args += ("--alias", CLAUDE_NAMES)
    with running_server(*args, home=home) as process:
        yield process


@pytest.fixture
def picture_site() -> Iterator[str]:
    """A local web server: /cat.png (a picture), /big.png (3 MiB), /gone (404)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = {"/cat.png": PICTURE, "/big.png": b"\x89PNG" + b"\x00" * 3 * 2**20}.get(
                self.path
            )
            self.send_response(200 if body else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *_args) -> None:
            pass

    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{site.server_address[1]}"
    site.shutdown()
    site.server_close()
