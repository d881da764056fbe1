"""The inference worker process: owns the native backend, serves requests over a pipe.

Native code (llama.cpp) can abort or run out of memory; in a separate process that takes down
only the worker, and the client turns it into a clear error. The worker loads one model, then
runs one generation at a time, streaming a message per chunk; between chunks it reads the pipe
for a cancel (or shutdown) so a long generation stops promptly.
"""

from __future__ import annotations

import traceback
from multiprocessing.connection import Connection

from app.engine.errors import MtpStudioError, RuntimeBackendError
from app.engine.runtime.backend import DecodeBackend
from app.engine.runtime.backends import open_backend
from app.engine.runtime.generation import generate
from app.engine.runtime.messages import (
    CancelGeneration,
    ChunkMessage,
    GenerationFinished,
    LoadModel,
    ModelLoaded,
    Shutdown,
    StartGeneration,
    WorkerFailure,
)


class _Worker:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._backend: DecodeBackend | None = None
        self._shutdown = False

    def serve(self) -> None:
        try:
            while not self._shutdown:
                try:
                    message = self._connection.recv()
                except EOFError:
                    return
                self._handle(message)
        finally:
            if self._backend is not None:
                self._backend.close()

    def _handle(self, message: object) -> None:
        request_id = message.request_id if isinstance(message, StartGeneration) else None
        try:
            if isinstance(message, LoadModel):
                self._load(message)
            elif isinstance(message, StartGeneration):
                self._generate(message)
            elif isinstance(message, Shutdown):
                self._shutdown = True
        except MtpStudioError as exc:
            self._connection.send(WorkerFailure(request_id, str(exc), user_error=True))
        except Exception:
            self._connection.send(
                WorkerFailure(request_id, traceback.format_exc(), user_error=False)
            )

    def _load(self, message: LoadModel) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None
        self._backend = open_backend(message.backend, message.path, message.settings)
        self._connection.send(ModelLoaded(self._backend.info))

    def _generate(self, message: StartGeneration) -> None:
        if self._backend is None:
            raise RuntimeBackendError("no model is loaded in the inference worker")
        request_id = message.request_id

        def cancelled() -> bool:
            while self._connection.poll():
                incoming = self._connection.recv()
                if isinstance(incoming, Shutdown):
                    self._shutdown = True
                    return True
                if isinstance(incoming, CancelGeneration) and incoming.request_id == request_id:
                    return True
            return False

        result = generate(
            self._backend,
            message.request,
            emit=lambda chunk: self._connection.send(ChunkMessage(request_id, chunk)),
            cancelled=cancelled,
        )
        self._connection.send(GenerationFinished(request_id, result))


def worker_main(connection: Connection) -> None:
    """Entry point of the spawned worker process."""
    _Worker(connection).serve()
