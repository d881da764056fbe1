"""The inference worker process: owns the native backend, serves requests over a pipe.

Native code (llama.cpp) can abort or run out of memory; in a separate process that takes down
only the worker, and the client turns it into a clear error. The worker loads one model, then
runs one generation at a time, streaming a message per chunk; between chunks it reads the pipe
for a cancel (or shutdown) so a long generation stops promptly.
"""

from __future__ import annotations

import signal
import time
import traceback
from multiprocessing.connection import Connection

from app.engine.errors import MtpStudioError, RuntimeBackendError
from app.engine.runtime.backends.choice import open_backend
from app.engine.runtime.core.backend import DecodeBackend
from app.engine.runtime.core.request import TokenChunk
from app.engine.runtime.process.messages import (
    CancelGeneration,
    ChunkMessage,
    GenerationFinished,
    LoadModel,
    ModelLoaded,
    Shutdown,
    StartGeneration,
    WorkerFailure,
)
from app.engine.runtime.speculative.depth_policy import DepthPolicies
from app.engine.runtime.speculative.generation import generate

_CHUNK_INTERVAL_SECONDS = 0.02


class _ChunkSender:
    """Sends the first chunk at once, then at most one merged chunk per interval.

    A small model commits thousands of tokens a second; one message per cycle would cost the
    decoding loop more than the GUI can show. Merged chunks keep every token and the latest stats.
    """

    def __init__(self, connection: Connection, request_id: int) -> None:
        self._connection = connection
        self._request_id = request_id
        self._pending: list[TokenChunk] = []
        self._last_sent = 0.0

    def add(self, chunk: TokenChunk) -> None:
        self._pending.append(chunk)
        now = time.perf_counter()
        if now - self._last_sent >= _CHUNK_INTERVAL_SECONDS:
            self.flush()
            self._last_sent = now

    def flush(self) -> None:
        if not self._pending:
            return
        merged = TokenChunk(
            token_ids=tuple(token for chunk in self._pending for token in chunk.token_ids),
            text="".join(chunk.text for chunk in self._pending),
            stats=self._pending[-1].stats,
        )
        self._pending = []
        self._connection.send(ChunkMessage(self._request_id, merged))


class _Worker:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._backend: DecodeBackend | None = None
        self._depth_policies = DepthPolicies()
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
        self._backend = open_backend(
            message.backend, message.path, message.settings, message.sidecar
        )
        self._depth_policies = DepthPolicies()
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

        sender = _ChunkSender(self._connection, request_id)
        result = generate(
            self._backend,
            message.request,
            emit=sender.add,
            cancelled=cancelled,
            depth_policies=self._depth_policies,
        )
        sender.flush()
        self._connection.send(GenerationFinished(request_id, result))
        if message.request.adaptive_depth:
            self._depth_policies.save()  # after the reply: ~0.6–1.6 ms the user need not wait


def worker_main(connection: Connection) -> None:
    """Entry point of the spawned worker process.

    Ctrl-C in a terminal reaches the whole process group; the client turns it into a cancel, so
    the worker itself ignores SIGINT instead of dying with a traceback.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _Worker(connection).serve()
