"""The `serve` processes the server tests share: an open one with the default settings (auto MTP
depth), and a keyed one with a queue of 1; each keeps its app folders in a temporary home."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.server_process import ServerProcess, running_server

API_KEY = "test-key-0123456789"
CORS_ORIGIN = "http://localhost:3000"


@pytest.fixture(scope="session")
def server_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("serve-home")


@pytest.fixture(scope="session")
def server(server_home: Path) -> Iterator[ServerProcess]:
    with running_server(home=server_home) as process:
        yield process


@pytest.fixture(scope="session")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    home = tmp_path_factory.mktemp("keyed-serve-home")
    with running_server("--api-key", API_KEY, "--queue-size", "1", home=home) as process:
        yield process


@pytest.fixture(scope="session")
def limits_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A 1024-token context (replies without max_tokens fill it quickly), a 1 MiB body cap, one
    allowed browser origin and a queue of one."""
    home = tmp_path_factory.mktemp("limits-serve-home")
    args = ("--ctx", "1024", "--max-body-mib", "1", "--cors", CORS_ORIGIN, "--queue-size", "1")
    with running_server(*args, home=home) as process:
        yield process
