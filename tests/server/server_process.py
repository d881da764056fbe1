"""``mtp-studio serve`` run as a real subprocess for the tests, as a user (or the panel) runs it.

:func:`running_server` starts it on a free port, waits for its ``listening on URL`` line and
collects everything it writes on stderr (the request log) for the tests to read. Given ``home``,
the server's app folders (where the adaptive depth keeps what it learnt) live there.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from app.engine.runtime.core.demo_model import demo_model_path

STARTUP_SECONDS = 120
_LISTENING = re.compile(r"listening on (http://\S+/v1)")


@dataclass
class ServerProcess:
    process: subprocess.Popen[str]
    base_url: str = ""
    lines: list[str] = field(default_factory=list)

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
        raise AssertionError(
            f"serve never logged {pattern!r}; its stderr:\n" + "\n".join(self.lines)
        )


def serve_command(*args: str) -> list[str]:
    """``serve`` with ``args``; pinned to the demo model unless the args name a model or a
    models folder (a library server must be given its own folders: see ``library_env``)."""
    if "--model" not in args and "--models-dir" not in args:
        args = ("--model", str(demo_model_path()), *args)
    return [sys.executable, "-m", "app", "serve", *args]


def library_env(root: Path) -> dict[str, str]:
    """Environment for a library server whose Hugging Face cache and app folders are under
    ``root`` (never the user's)."""
    return {"HF_HOME": str(root / "hf-home"), "HF_HUB_CACHE": str(root / "hf-home" / "hub")}


@contextlib.contextmanager
def running_server(
    *args: str, home: Path | None = None, env: dict[str, str] | None = None
) -> Iterator[ServerProcess]:
    extra = {**({"MTP_STUDIO_HOME": str(home)} if home is not None else {}), **(env or {})}
    env = {**os.environ, **extra} if extra else None
    process = subprocess.Popen(
        serve_command("--port", "0", *args),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    server = ServerProcess(process)
    assert process.stderr is not None
    reader = threading.Thread(
        target=lambda: server.lines.extend(iter(process.stderr.readline, "")), daemon=True
    )
    reader.start()
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while not server.base_url:
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("serve did not start:\n" + "".join(server.lines))
            for line in list(server.lines):
                if match := _LISTENING.search(line):
                    server.base_url = match.group(1)
            time.sleep(0.05)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
