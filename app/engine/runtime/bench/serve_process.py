"""``mtp-studio serve`` started in its own process for a benchmark, as a user starts it.

:class:`ServeProcess` runs ``python -m app serve --port 0 …``, waits for its ``listening on URL``
line, keeps what it writes on stderr (its request and model log) and measures the resident
memory of the server and of its inference workers (its child processes) with psutil.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from app.engine.errors import RuntimeBackendError

START_SECONDS = 180.0
_LISTENING = re.compile(r"listening on (http://\S+/v1)")


class ServeProcess:
    """One ``serve`` process; use it in ``with``."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        command = [sys.executable, "-m", "app", "serve", "--port", "0", *args]
        self.lines: list[str] = []
        self.base_url = ""
        self._process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
            cwd=Path(__file__).resolve().parents[4],
        )
        assert self._process.stderr is not None
        stderr = self._process.stderr
        self._reader = threading.Thread(
            target=lambda: self.lines.extend(iter(stderr.readline, "")), daemon=True
        )
        self._reader.start()

    @property
    def pid(self) -> int:
        return self._process.pid

    def __enter__(self) -> ServeProcess:
        deadline = time.monotonic() + START_SECONDS
        while not self.base_url:
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeBackendError("serve did not start:\n" + "".join(self.lines[-20:]))
            for line in list(self.lines):
                if match := _LISTENING.search(line):
                    self.base_url = match.group(1)
            time.sleep(0.05)
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def resident_bytes(self) -> tuple[int, int]:
        """(the server process, its inference workers together) resident memory in bytes."""
        server = psutil.Process(self._process.pid)
        workers = 0
        for child in server.children(recursive=True):
            try:
                if "spawn_main" in " ".join(child.cmdline()):
                    workers += child.memory_info().rss
            except psutil.Error:
                continue
        return server.memory_info().rss, workers
