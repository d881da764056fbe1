"""The inference worker's entry point, kept free of numpy so llama.cpp can load first.

``multiprocessing`` (spawn) imports the module of a process's target before it calls it; the
worker module imports the runtime, and the runtime numpy. A CUDA build of llama.cpp crashes on
its first model load when numpy was imported before it (see
:mod:`~app.engine.runtime.backends.llama_cpp.load_order`), so the client starts the worker
through :func:`run_worker`, which loads llama.cpp's libraries first when the worker will run
llama.cpp, then imports the worker. Importing this module imports neither.
"""

from __future__ import annotations

from multiprocessing.connection import Connection

LLAMA_CPP = "llama.cpp"  # app.engine.runtime.backends.choice.LLAMA_CPP (that module imports more)


def run_worker(connection: Connection, backend: str) -> None:
    """Serve ``connection`` as the worker of a ``backend`` model."""
    if backend == LLAMA_CPP:
        from app.engine.runtime.backends.llama_cpp.load_order import load_llama_cpp_first

        load_llama_cpp_first()
    from app.engine.runtime.process.worker import worker_main

    worker_main(connection)
