"""The one launcher for the server processes the tests start, as a user (or the panel) starts them.

:func:`launch` runs any server command as a real subprocess, collects everything it writes on
stderr (its request log) for the tests to read, waits until a readiness check gives the server's
``/v1`` URL, and always stops the process when the ``with`` block ends — the shape of vLLM's
``RemoteOpenAIServer``. Every server a test starts goes through it:

- :func:`running_server`: ``mtp-studio serve`` (or the bundled executable's ``serve``) on port 0;
  ready when it logs ``listening on URL``, so the port it bound is the one the tests use;
- ``tests/llama_server.py``: llama.cpp's ``llama-server`` on a free port; ready when
  ``/health`` answers 200.

Given ``home``, a ``serve`` process keeps its app folders there (where the adaptive depth keeps
what it learnt).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from app.engine.runtime.core.demo_model import demo_model_path

STARTUP_SECONDS = 120
STOP_SECONDS = 20
_LISTENING = re.compile(r"listening on (http://\S+/v1)")


@dataclass
class ServerProcess:
    process: subprocess.Popen[str]
    base_url: str = ""
    """The ``/v1`` URL, once the server is ready."""
    lines: list[str] = field(default_factory=list)
    """Everything the server wrote on stderr so far, one line per item."""

    @property
    def root_url(self) -> str:
        return self.base_url.removesuffix("/v1")

    @property
    def port(self) -> int:
        return int(self.root_url.rsplit(":", 1)[1])

    def wait_for_line(self, pattern: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if re.search(pattern, line):
                    return line
            time.sleep(0.05)
        raise AssertionError(f"the server never logged {pattern!r}; its stderr:\n{self.log()}")

    def log(self) -> str:
        return "".join(self.lines)


Readiness = Callable[[ServerProcess], str | None]
"""Given the starting server, its ``/v1`` URL once it answers, else None (asked again soon)."""


def listening_line(server: ServerProcess) -> str | None:
    """Ready when ``serve`` has logged ``listening on URL``."""
    for line in list(server.lines):
        if match := _LISTENING.search(line):
            return match.group(1)
    return None


def library_env(root: Path) -> dict[str, str]:
    """This environment with the Hugging Face cache under ``root`` (never the user's), for a
    library server."""
    return {
        **os.environ,
        "HF_HOME": str(root / "hf-home"),
        "HF_HUB_CACHE": str(root / "hf-home" / "hub"),
    }


@contextlib.contextmanager
def launch(
    command: Sequence[str],
    ready: Readiness,
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    startup_seconds: float = STARTUP_SECONDS,
    preexec_fn: Callable[[], None] | None = None,
) -> Iterator[ServerProcess]:
    """Run ``command`` until the block ends; yield it once ``ready`` gives its ``/v1`` URL;
    ``preexec_fn`` runs in the child before it starts (e.g. to lower its resource limits).

    A server that exits or is not ready in ``startup_seconds`` fails the test with its stderr.
    """
    process = subprocess.Popen(
        list(command),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,  # read at once by a thread: an unread pipe would fill and stall it
        text=True,
        env=env,
        cwd=cwd,
        preexec_fn=preexec_fn,
    )
    server = ServerProcess(process)
    assert process.stderr is not None
    reader = threading.Thread(
        target=lambda: server.lines.extend(iter(process.stderr.readline, "")), daemon=True
    )
    reader.start()
    try:
        deadline = time.monotonic() + startup_seconds
        while not server.base_url:
            if process.poll() is not None or time.monotonic() > deadline:
                reader.join(timeout=5)
                raise AssertionError(f"{command[0]} did not start:\n{server.log()[-4000:]}")
            server.base_url = ready(server) or ""
            if not server.base_url:
                time.sleep(0.05)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        reader.join(timeout=5)


def serve_command(*args: str) -> list[str]:
    """``serve`` with ``args``; pinned to the demo model unless the args name a model or a
    models folder (a library server must be given its own folders: see ``library_env``); one
    request per model at a time unless the args say ``--parallel`` (the queue's tests count on
    the second request waiting)."""
    if "--model" not in args and "--models-dir" not in args:
        args = ("--model", str(demo_model_path()), *args)
    if "--parallel" not in args:
        args = (*args, "--parallel", "1")
    return [sys.executable, "-m", "app", "serve", *args]


@contextlib.contextmanager
def running_server(
    *args: str,
    home: Path | None = None,
    program: Sequence[str] | None = None,
    env: dict[str, str] | None = None,
    preexec_fn: Callable[[], None] | None = None,
) -> Iterator[ServerProcess]:
    """``serve`` with ``args`` on a port of its choosing (``--port 0``).

    ``program`` replaces ``python -m app`` (the bundled executable); ``env`` replaces the
    environment, ``home`` sets its ``MTP_STUDIO_HOME``.
    """
    command = [*program, "serve", *args] if program else serve_command(*args)
    environment = dict(os.environ if env is None else env)
    if home is not None:
        environment["MTP_STUDIO_HOME"] = str(home)
    with launch(
        [*command, "--port", "0"], listening_line, env=environment, preexec_fn=preexec_fn
    ) as server:
        yield server
