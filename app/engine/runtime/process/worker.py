"""The inference worker process: owns the native backend, serves requests over a pipe.

Native code (llama.cpp) can abort or run out of memory; in a separate process that takes down
only the worker, and the client turns it into a clear error. The worker loads one model, then
runs one generation at a time, streaming a message per chunk (:data:`CHUNK_INTERVAL_SECONDS`);
whenever a chunk goes out it reads the pipe for a cancel (or shutdown), so a long generation
stops promptly. A model loaded for several sequences (``serve --parallel N`` on llama.cpp) runs
its generations at once instead, each on a thread of its own, while this thread reads the pipe
(:mod:`.sequence_runs`).
"""

from __future__ import annotations

import signal
import threading
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
from app.engine.runtime.process.sequence_runs import SequenceRuns
from app.engine.runtime.speculative.depth_policy import DepthPolicies
from app.engine.runtime.speculative.generation import generate

CHUNK_INTERVAL_SECONDS = 0.02
"""The first chunk of a reply goes out at once, then at most one per this interval, merging the
steps in between: a small model commits thousands of tokens a second, and a message (and a
statistics snapshot) per step would cost the decoding loop more than a front end can show. The
pipe is read for a cancel whenever a chunk goes out."""


class _Worker:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._backend: DecodeBackend | None = None
        self._depth_policies = DepthPolicies()
        self._shutdown = False
        self._runs: SequenceRuns | None = None
        self._send_lock = threading.Lock()

    def serve(self) -> None:
        try:
            while not self._shutdown:
                try:
                    message = self._connection.recv()
                except EOFError:
                    return
                self._handle(message)
        finally:
            if self._runs is not None:
                self._runs.stop()
            if self._backend is not None:
                self._backend.close()

    def _handle(self, message: object) -> None:
        request_id = message.request_id if isinstance(message, StartGeneration) else None
        try:
            if isinstance(message, LoadModel):
                self._load(message)
            elif isinstance(message, StartGeneration) and self._runs is not None:
                self._runs.start(message)
            elif isinstance(message, StartGeneration):
                self._generate(message)
            elif isinstance(message, CancelGeneration) and self._runs is not None:
                self._runs.cancel(message.request_id)
            elif isinstance(message, Shutdown):
                self._shutdown = True
        except MtpStudioError as exc:
            self._send(WorkerFailure(request_id, str(exc), user_error=True))
        except Exception:
            self._send(WorkerFailure(request_id, traceback.format_exc(), user_error=False))

    def _send(self, message: object) -> None:
        """Post ``message`` to the client (generations on several threads post at once)."""
        with self._send_lock:
            self._connection.send(message)

    def _load(self, message: LoadModel) -> None:
        if self._runs is not None:
            self._runs.stop()
            self._runs = None
        if self._backend is not None:
            self._backend.close()
            self._backend = None
        self._backend = open_backend(
            message.backend, message.path, message.settings, message.sidecar
        )
        self._depth_policies = DepthPolicies()
        if self._backend.sequence_backends:
            self._runs = SequenceRuns(
                self._backend.sequence_backends, self._send, CHUNK_INTERVAL_SECONDS
            )
        self._send(ModelLoaded(self._backend.info))

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

        def send(chunk: TokenChunk) -> None:
            self._send(ChunkMessage(request_id, chunk))

        result = generate(
            self._backend,
            message.request,
            emit=send,
            cancelled=cancelled,
            depth_policies=self._depth_policies,
            chunk_interval=CHUNK_INTERVAL_SECONDS,
        )
        self._send(GenerationFinished(request_id, result))
        if message.request.adaptive_depth:
            self._depth_policies.save()  # after the reply: ~0.6–1.6 ms the user need not wait


def worker_main(connection: Connection) -> None:
    """Entry point of the spawned worker process.

    Ctrl-C in a terminal reaches the whole process group; the client turns it into a cancel, so
    the worker itself ignores SIGINT instead of dying with a traceback.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _Worker(connection).serve()
