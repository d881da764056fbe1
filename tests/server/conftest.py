"""The `serve` processes the server tests share: an open one, and a keyed one with a queue of 1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.server.server_process import ServerProcess, running_server

API_KEY = "test-key-0123456789"


@pytest.fixture(scope="session")
def server() -> Iterator[ServerProcess]:
    with running_server("--mtp-depth", "3") as process:
        yield process


@pytest.fixture(scope="session")
def keyed_server() -> Iterator[ServerProcess]:
    with running_server("--api-key", API_KEY, "--queue-size", "1") as process:
        yield process
