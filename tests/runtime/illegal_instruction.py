"""Stands in for a CPU that faults on the inference library: the worker is sent SIGILL, the signal
the kernel sends a process that runs an instruction its CPU does not have (Linux's /proc finds the
worker of a CLI run). What the app answers is then the real thing: the exit status, the message,
no worker started again.
"""

from __future__ import annotations

import resource
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from app.engine.runtime.backends.llama_cpp.cpu_backends import cpu_modules, installed_folder


@contextmanager
def no_core_files() -> Iterator[None]:
    """A process killed by SIGILL may leave a core file in its working folder; not here."""
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (0, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_CORE, (soft, hard))


def inference_worker_of(parent: int, timeout: float = 120.0) -> int:
    """The pid of the inference worker ``parent`` spawned (waits for it to appear)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in _children(parent):
            try:
                command = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if b"spawn_main" in command:
                return child
        time.sleep(0.1)
    raise AssertionError(f"process {parent} started no inference worker in {timeout:.0f} s")


def _children(parent: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{parent}/task").glob("*"):
        try:
            found += [int(pid) for pid in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def expected_advice() -> str:
    """What the message must tell a user of the llama.cpp installed here to do."""
    if cpu_modules(installed_folder()):
        return "MTP_STUDIO_CPU_VARIANT="
    return "bash packaging/setup.sh --portable"


SIGILL = signal.SIGILL
