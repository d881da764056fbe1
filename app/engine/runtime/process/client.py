"""The caller's side of the inference worker: load a model, stream generations, cancel, close.

This is the API the CLI and the chat window use::

    client = RuntimeClient(path)                 # checks the file and backend, starts nothing
    client.choice                                # BackendChoice: which backend and why
    info = client.load()                         # spawns the worker, loads the model
    stream = client.start(GenerationRequest(...))
    for chunk in stream:                         # TokenChunk: token ids, text, DecodeStats so far
        ...
    result = stream.result                       # GenerationResult (text, ids, stats, reason)
    stream.cancel()                              # from any thread; the worker stops promptly
    client.close()

A separate drafter named in the settings (``LoadSettings.drafter``) is checked against the model
here, so a drafter that does not fit is refused in one line before any worker starts.

The worker is a ``spawn``-ed process. If it dies (a native abort, out of memory, a kill), the
stream raises a clear :class:`RuntimeBackendError` and the next request starts a fresh worker —
unless it died by SIGILL: then every request raises the same :class:`UnrunnableBuildError`, which
says how to get a build this CPU runs (``worker_death``).
A worker that does not stop within ``cancel_grace_seconds`` of a cancel is terminated.

A model loaded for several sequences (``LoadSettings.sequences``, ``serve --parallel N``) runs
up to that many generations at once; their streams share the pipe, and whichever stream reads it
hands the other streams' messages to their inboxes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path

from app.engine.drafter.pairing import choose_drafter
from app.engine.errors import RuntimeBackendError, UnrunnableBuildError
from app.engine.runtime.backends.choice import MLX, BackendChoice, choose_backend
from app.engine.runtime.core.backend import LoadSettings, ModelInfo
from app.engine.runtime.core.request import GenerationRequest, GenerationResult, TokenChunk
from app.engine.runtime.core.stats import StatsRecorder
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
from app.engine.runtime.process.worker_death import worker_death_error
from app.engine.runtime.process.worker_entry import run_worker

_POLL_SECONDS = 0.05
_SHUTDOWN_SECONDS = 5.0


class RuntimeClient:
    """One model served by one worker process (restarted on demand after a crash)."""

    def __init__(
        self,
        model_path: Path,
        *,
        backend: str = "auto",
        settings: LoadSettings | None = None,
        sidecar: Path | None = None,
        cancel_grace_seconds: float = 10.0,
    ) -> None:
        self._model_path = Path(model_path)
        self.choice: BackendChoice = choose_backend(backend, self._model_path)
        self._backend = self.choice.name
        self._settings = _with_projector(settings or LoadSettings(), self.choice, self._model_path)
        if self._settings.drafter is not None:
            choose_drafter(self._model_path, self._settings.drafter)
        self._sidecar = _checked_sidecar(sidecar, self.choice) if sidecar is not None else None
        self._cancel_grace_seconds = cancel_grace_seconds
        self._process: BaseProcess | None = None
        self._connection: Connection | None = None
        self._info: ModelInfo | None = None
        self._send_lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._next_request_id = 1
        self._active: set[GenerationStream] = set()
        self._unrunnable: UnrunnableBuildError | None = None
        self._routing = threading.Condition()
        self._inboxes: dict[int, deque[object]] = {}
        self._reading = False
        self._death: RuntimeBackendError | None = None

    @property
    def info(self) -> ModelInfo | None:
        """The loaded model's description (None before :meth:`load`)."""
        return self._info

    @property
    def worker_pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def drafter(self) -> Path | None:
        """The separate drafter model named in the settings (None: the one the worker finds
        beside the model, if any; :attr:`info` says which drafts once loaded)."""
        return self._settings.drafter

    @property
    def sidecar(self) -> Path | None:
        """The MTP sidecar this model loads with (None: the folder's own head, or none)."""
        return self._sidecar

    def load(self, sidecar: Path | None = None) -> ModelInfo:
        """Start the worker and load the model (no-op when already loaded and alive).

        ``sidecar`` replaces the MTP sidecar given to the constructor; the worker then reloads.
        """
        if sidecar is not None and sidecar != self._sidecar:
            self._sidecar = _checked_sidecar(sidecar, self.choice)
            self._info = None
        if self._unrunnable is not None:
            raise self._unrunnable  # a new worker would die by the same illegal instruction
        if self._info is not None and self._process is not None and self._process.is_alive():
            return self._info
        self._stop_worker()
        context = multiprocessing.get_context("spawn")
        parent_end, child_end = context.Pipe(duplex=True)
        process = context.Process(
            target=run_worker,
            args=(child_end, self._backend),
            name="mtp-studio-inference",
            daemon=True,
        )
        process.start()
        child_end.close()
        self._process, self._connection = process, parent_end
        self._death = None
        self._send_or_died(
            LoadModel(self._backend, self._model_path, self._settings, self._sidecar),
            "loading the model",
        )
        reply = self._receive("loading the model")
        if isinstance(reply, WorkerFailure):
            self._stop_worker()
            _raise_failure(reply)
        if not isinstance(reply, ModelLoaded):
            self._stop_worker()
            raise RuntimeBackendError(f"the inference worker answered a load with {reply!r}")
        self._info = reply.info
        return reply.info

    def start(self, request: GenerationRequest) -> GenerationStream:
        """Begin a generation; iterate the returned stream for its chunks. Thread-safe: a
        model loaded for several sequences takes several at once."""
        with self._start_lock:
            return self._start(request)

    def _start(self, request: GenerationRequest) -> GenerationStream:
        running = {stream for stream in self._active if stream.result is None and stream.alive}
        if len(running) >= (self._info.sequences if self._info is not None else 1):
            raise RuntimeBackendError(
                "a generation is already running on this model; cancel it or wait for it first"
            )
        if request.sampler.seed is None:  # fixed here so even a killed stream reports it
            sampler = dataclasses.replace(request.sampler, seed=secrets.randbits(63))
            request = dataclasses.replace(request, sampler=sampler)
        self.load()
        request_id = self._next_request_id
        self._next_request_id += 1
        stream = GenerationStream(self, request_id, request)
        with self._routing:
            self._inboxes[request_id] = deque()
        self._active = {*running, stream}
        self._send_or_died(StartGeneration(request_id, request), "starting a reply")
        return stream

    def generate(
        self, request: GenerationRequest, on_chunk: Callable[[TokenChunk], None] | None = None
    ) -> GenerationResult:
        """Run ``request`` to completion, calling ``on_chunk`` for every streamed chunk."""
        stream = self.start(request)
        for chunk in stream:
            if on_chunk is not None:
                on_chunk(chunk)
        assert stream.result is not None
        return stream.result

    def close(self) -> None:
        """Stop the worker and free the model."""
        if self._connection is not None and self._process is not None:
            with contextlib.suppress(OSError, ValueError):
                self._send(Shutdown())
            self._process.join(_SHUTDOWN_SECONDS)
        self._stop_worker()

    def __enter__(self) -> RuntimeClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # --- used by GenerationStream -------------------------------------------------------------

    def _send(self, message: object) -> None:
        if self._connection is None:
            raise RuntimeBackendError("the inference worker is not running; load the model first")
        with self._send_lock:
            self._connection.send(message)

    def _send_or_died(self, message: object, doing: str) -> None:
        """Send ``message``; a worker that died before reading it (a build that dies by an
        illegal instruction as llama.cpp loads can be gone before the first request is written)
        is reported as its death, not as a broken pipe."""
        try:
            self._send(message)
        except OSError:
            raise self._worker_died(doing) from None

    def _receive(self, doing: str, deadline: float | None = None) -> object | None:
        """The next message, or None once ``deadline`` passes; raises if the worker dies."""
        connection, process = self._connection, self._process
        if connection is None or process is None:
            raise RuntimeBackendError("the inference worker is not running; load the model first")
        while True:
            try:
                if connection.poll(_POLL_SECONDS):
                    return connection.recv()
            except (EOFError, OSError):
                raise self._worker_died(doing) from None
            if not process.is_alive():
                raise self._worker_died(doing)
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def _next_for(self, request_id: int, doing: str, deadline: float | None) -> object | None:
        """The next message for generation ``request_id`` (None once ``deadline`` passes).
        One stream at a time reads the pipe and files what it reads by request; a message for
        no request (a failure of the worker itself) goes to every stream."""
        while True:
            with self._routing:
                inbox = self._inboxes.get(request_id)
                if inbox:
                    return inbox.popleft()
                if self._death is not None:
                    raise self._death
                if deadline is not None and time.monotonic() >= deadline:
                    return None
                reader = not self._reading
                if reader:
                    self._reading = True
                else:
                    self._routing.wait(_POLL_SECONDS)
            if reader:
                self._read_one(doing, deadline)

    def _read_one(self, doing: str, deadline: float | None) -> None:
        """Read one message (or time out) and file it in its stream's inbox."""
        try:
            until = time.monotonic() + _POLL_SECONDS
            message = self._receive(doing, until if deadline is None else min(deadline, until))
        except RuntimeBackendError as exc:
            with self._routing:
                self._death = exc
            raise
        finally:
            with self._routing:
                self._reading = False
                self._routing.notify_all()
        if message is None:
            return
        with self._routing:
            target = getattr(message, "request_id", None)
            boxes = self._inboxes.values() if target is None else [self._inboxes.get(target)]
            for box in boxes:
                if box is not None:
                    box.append(message)
            self._routing.notify_all()

    def _done_with(self, request_id: int) -> None:
        with self._routing:
            self._inboxes.pop(request_id, None)

    def _worker_died(self, doing: str) -> RuntimeBackendError:
        process = self._process
        code = None
        if process is not None:
            process.join(1.0)
            code = process.exitcode
        self._stop_worker()
        error = worker_death_error(self._backend, doing, self._model_path.name, code)
        if isinstance(error, UnrunnableBuildError):
            self._unrunnable = error
        return error

    def _stop_worker(self) -> None:
        """Kill the worker if it still runs (it holds nothing that needs a graceful exit)."""
        if self._process is not None and self._process.is_alive():
            self._process.kill()
            self._process.join()
        if self._connection is not None:
            self._connection.close()
        self._process, self._connection, self._info = None, None, None


class GenerationStream:
    """The chunks of one generation, then its :attr:`result`. :meth:`cancel` is thread-safe."""

    def __init__(self, client: RuntimeClient, request_id: int, request: GenerationRequest) -> None:
        self._client = client
        self._request_id = request_id
        self._request = request
        self._cancel_deadline: float | None = None
        self._token_ids: list[int] = []
        self._text: list[str] = []
        self._last_chunk: TokenChunk | None = None
        self.alive = True
        self.result: GenerationResult | None = None

    def __iter__(self) -> Iterator[TokenChunk]:
        try:
            while self.result is None:
                message = self._client._next_for(
                    self._request_id, "generating with", self._cancel_deadline
                )
                if message is None:
                    self._client._stop_worker()
                    self.result = self._cancelled_result()
                elif isinstance(message, ChunkMessage) and message.request_id == self._request_id:
                    self._token_ids.extend(message.chunk.token_ids)
                    self._text.append(message.chunk.text)
                    self._last_chunk = message.chunk
                    yield message.chunk
                elif (
                    isinstance(message, GenerationFinished)
                    and message.request_id == self._request_id
                ):
                    self.result = message.result
                elif isinstance(message, WorkerFailure) and message.request_id in (
                    self._request_id,
                    None,
                ):
                    self._client._done_with(self._request_id)
                    _raise_failure(message)
        finally:
            self.alive = False
            if self.result is not None:  # not a reader that stopped early: more may come
                self._client._done_with(self._request_id)

    def cancel(self) -> None:
        """Ask the worker to stop after the current cycle (terminated if it does not)."""
        if self.result is not None or self._cancel_deadline is not None:
            return
        self._cancel_deadline = time.monotonic() + self._client._cancel_grace_seconds
        with contextlib.suppress(OSError, ValueError, RuntimeBackendError):
            self._client._send(CancelGeneration(self._request_id))

    def wait(self) -> GenerationResult:
        """Consume the remaining chunks and return the result."""
        for _chunk in self:
            pass
        assert self.result is not None
        return self.result

    def _cancelled_result(self) -> GenerationResult:
        seed = self._request.sampler.seed
        assert seed is not None, "RuntimeClient.start fixes the seed of every request"
        if self._last_chunk is not None:
            stats = self._last_chunk.stats
        else:
            mode = "ar" if self._request.mtp_depth == 0 else str(self._request.accept)
            stats = StatsRecorder(mode=mode, depth=self._request.mtp_depth).snapshot()
        return GenerationResult(
            text="".join(self._text),
            token_ids=tuple(self._token_ids),
            prompt_token_count=stats.prompt_tokens,
            finish_reason="cancelled",
            stats=stats,
            seed=seed,
            note="the worker did not stop in time after the cancel and was restarted",
        )


def _checked_sidecar(sidecar: Path, choice: BackendChoice) -> Path:
    sidecar = Path(sidecar).expanduser()
    if choice.name != MLX:
        raise RuntimeBackendError(
            f"an MTP sidecar ({sidecar.name}) is used by the MLX backend with a model folder; "
            f"{choice.name} runs GGUF files that carry their own MTP head — graft the sidecar "
            "into the GGUF instead, or open the model's folder"
        )
    if not sidecar.is_file():
        raise RuntimeBackendError(
            f"the MTP sidecar {sidecar} does not exist; pass the path of an mtp.safetensors file"
        )
    return sidecar


def _with_projector(settings: LoadSettings, choice: BackendChoice, model: Path) -> LoadSettings:
    """The settings with the vision projector to load: the one named (checked here, so a wrong
    path fails before a worker starts), else the one beside a GGUF model by the rule ``get``
    fetches by (docs/vision.md#projectors-in-downloads), else none."""
    if settings.projector is not None:
        projector = Path(settings.projector).expanduser()
        if choice.name == MLX:
            raise RuntimeBackendError(
                f"a vision projector ({projector.name}) is loaded with a GGUF model on llama.cpp; "
                "on MLX a model folder reads images with the vision tower inside it (mlx-vlm): "
                "drop --mmproj"
            )
        if not projector.is_file():
            raise RuntimeBackendError(
                f"the vision projector {projector} does not exist; pass the path of an "
                "mmproj-*.gguf file"
            )
        return dataclasses.replace(settings, projector=projector)
    if not settings.images or choice.name == MLX:
        return settings
    from app.engine.library.projectors import projector_beside  # its module reads GGUF headers

    return dataclasses.replace(settings, projector=projector_beside(model))


def _raise_failure(failure: WorkerFailure) -> None:
    if failure.user_error:
        raise RuntimeBackendError(failure.message)
    raise RuntimeError(f"the inference worker hit a bug:\n{failure.message}")
