"""What a dead inference worker means for the user: the error its death raises.

A native abort, an out-of-memory kill or a stray signal is worth a fresh worker on the next
request. SIGILL is not: the inference library holds an instruction this CPU does not run, so
every worker would die the same way. That death raises :class:`UnrunnableBuildError`, which names
the library and the one thing to do, and the client keeps raising it instead of starting workers
that crash (``bench`` and ``serve`` then stop with it).
"""

from __future__ import annotations

import signal

from app.engine.errors import RuntimeBackendError, UnrunnableBuildError, WorkerStopped
from app.engine.runtime.backends.choice import LLAMA_CPP
from app.engine.runtime.backends.llama_cpp.cpu_backends import illegal_instruction_advice

# How Windows reports a process ended by an illegal instruction (STATUS_ILLEGAL_INSTRUCTION).
_WINDOWS_ILLEGAL_INSTRUCTION = 0xC000001D


def worker_death_error(
    backend: str, doing: str, model_name: str, exitcode: int | None
) -> RuntimeBackendError:
    """The error for a worker of ``backend`` that died while ``doing`` ``model_name``."""
    if exitcode in (-signal.SIGILL, _WINDOWS_ILLEGAL_INSTRUCTION):
        return UnrunnableBuildError(
            f"the {backend} worker was killed by SIGILL (an illegal instruction) while {doing} "
            f"{model_name}: {_advice(backend)}"
        )
    if exitcode is not None and exitcode < 0:
        how = f"killed by {signal.Signals(-exitcode).name}"
    elif exitcode is not None:
        how = f"exit code {exitcode}"
    else:
        how = "unknown cause"
    return WorkerStopped(
        f"the {backend} worker stopped unexpectedly while {doing} {model_name} ({how}) — a "
        "native crash or out of memory in the inference library; the next request starts a "
        "fresh worker"
    )


def _advice(backend: str) -> str:
    if backend == LLAMA_CPP:
        return illegal_instruction_advice()
    return (
        f"the {backend} library was built for a CPU with more instruction sets than this one; "
        "install a build of it made for this CPU, or run GGUF models on llama.cpp"
    )
