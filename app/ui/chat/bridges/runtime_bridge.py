"""The chat window's link to the runtime: one thread that drives a :class:`RuntimeClient`.

Loading a model, starting a worker and reading its stream all wait, so none of it may run on the
GUI thread. One Python thread per window owns the client and runs commands in order (load,
generate, close); a generation's chunks come back as signals of its :class:`ReplyTicket`, which
lives on the GUI thread, so Qt delivers them there. The ticket's recorder (if any) writes the
reply into the history on this thread, so no disk write lands on the GUI thread either.

The bridge and its tickets have no Qt parent on purpose: the thread holds them until it is done,
so closing (and deleting) the window can never delete an object the thread still emits from;
deliveries to a deleted window are dropped by Qt.

Errors become readable messages: an :class:`MtpStudioError` from the runtime already says what
went wrong and how to fix it; anything else is logged with its traceback and summarised.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.engine.chat.recorder import ReplyRecorder
from app.engine.errors import MtpStudioError
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.request import GenerationRequest
from app.engine.runtime.process.client import GenerationStream, RuntimeClient
from app.ui.errors import readable

log = logging.getLogger(__name__)

CRASH_ADVICE = "The conversation is kept. Send a message or press Regenerate to try again."
OUT_OF_MEMORY_ADVICE = (
    " If it keeps happening the machine may be short of memory: choose a smaller model, or a "
    "smaller Context window in Settings."
)
"""Only for a worker the system killed (SIGKILL: the out-of-memory killer, most often); a
worker that died by SIGILL, say, needs another build, not a smaller model."""


def crash_advice(message: str) -> str:
    """What to do after the worker died with ``message`` (its cause is in the message)."""
    return CRASH_ADVICE + (OUT_OF_MEMORY_ADVICE if "SIGKILL" in message else "")


class ReplyTicket(QObject):
    """One generation request and its signals (delivered on the GUI thread).

    ``started``: the model is loaded and tokens are coming; ``chunk(text, stats)``: new text and
    the statistics so far; ``finished(result)`` or ``failed(message)`` ends it.
    """

    started = Signal()
    chunk = Signal(str, object)
    finished = Signal(object)
    failed = Signal(str)

    def __init__(self, request: GenerationRequest, recorder: ReplyRecorder | None = None) -> None:
        super().__init__()
        self.request = request
        self.recorder = recorder
        self._lock = threading.Lock()
        self._stream: GenerationStream | None = None
        self._cancelled = False

    def cancel(self) -> None:
        """Stop the generation (thread-safe); the text so far is kept as the reply."""
        with self._lock:
            self._cancelled = True
            stream = self._stream
        if stream is not None:
            stream.cancel()

    def _attach(self, stream: GenerationStream) -> None:
        with self._lock:
            self._stream = stream
            cancelled = self._cancelled
        if cancelled:
            stream.cancel()


@dataclass(frozen=True)
class _Generate:
    ticket: ReplyTicket


@dataclass(frozen=True)
class _Close:
    then: Callable[[], None] | None


class ReplyBridge(QObject):
    """One thread that runs a window's commands in order: replies (:meth:`generate`), the
    subclass's own commands (loading a model, checking a server…) and a final close.

    Subclasses say how a command of their own is handled (:meth:`_handle`), how a reply runs
    (:meth:`_run`) and what closing releases (:meth:`_release`). While the window closes, queued
    commands are skipped and queued replies fail with a message, so none starts.
    """

    def __init__(self, thread_name: str) -> None:
        super().__init__()
        self._commands: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._active: ReplyTicket | None = None
        self._closing = False
        self._thread = threading.Thread(target=self._serve, name=thread_name, daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        """True until :meth:`shutdown` has finished releasing what the bridge holds."""
        return self._thread.is_alive()

    def generate(self, ticket: ReplyTicket) -> None:
        """Queue ``ticket``'s request; it starts once earlier commands are done."""
        self._commands.put(_Generate(ticket))

    def stop(self) -> None:
        """Cancel the running generation, if any."""
        active = self._active
        if active is not None:
            active.cancel()

    def shutdown(self, then: Callable[[], None] | None = None) -> None:
        """Stop, release, then call ``then`` on the bridge thread; never waits."""
        if self._closing:
            return
        self._closing = True
        self.stop()
        self._commands.put(_Close(then))

    # -- the bridge thread --------------------------------------------------------------------

    def _serve(self) -> None:
        while True:
            command = self._commands.get()
            if isinstance(command, _Close):
                self._release()
                if command.then is not None:
                    command.then()
                return
            if self._closing:  # the window is closing: queued replies never start
                if isinstance(command, _Generate):
                    self._fail(command.ticket, "the chat window was closed before this reply began")
                continue
            if isinstance(command, _Generate):
                self._active = command.ticket
                try:
                    self._run(command.ticket)
                finally:
                    self._active = None
            else:
                self._handle(command)

    def _handle(self, command: object) -> None:
        raise NotImplementedError

    def _run(self, ticket: ReplyTicket) -> None:
        raise NotImplementedError

    def _release(self) -> None:
        raise NotImplementedError

    @staticmethod
    def _fail(ticket: ReplyTicket, message: str) -> None:
        recorder = ticket.recorder
        if recorder is not None:
            record(lambda: recorder.fail(message))
        ticket.failed.emit(message)


@dataclass(frozen=True)
class _Load:
    path: Path
    settings: LoadSettings
    sidecar: Path | None


@dataclass(frozen=True)
class _Unload:
    """Stop the worker (its memory goes back to the system); the next load starts a new one."""


class RuntimeBridge(ReplyBridge):
    """Loads models and runs generations off the GUI thread.

    ``loading(path)`` when a worker starts loading (also when a fresh worker replaces a crashed
    one), ``loaded(ModelInfo)`` when it is ready, ``load_failed(message)`` when it cannot load,
    ``unloaded`` once :meth:`unload` has stopped the worker.
    """

    loading = Signal(object)
    loaded = Signal(object)
    load_failed = Signal(str)
    unloaded = Signal()

    def __init__(self) -> None:
        self._client: RuntimeClient | None = None
        self._path: Path | None = None
        super().__init__("chat-runtime")

    @property
    def worker_pid(self) -> int | None:
        client = self._client
        return client.worker_pid if client is not None else None

    def load(self, path: Path, settings: LoadSettings, sidecar: Path | None = None) -> None:
        """Load ``path`` (replacing the current model) with the MTP ``sidecar`` of a model
        folder; the running reply is stopped first."""
        self.stop()
        self._commands.put(_Load(Path(path), settings, sidecar))

    def unload(self) -> None:
        """Stop the running reply and the worker; no model is loaded afterwards."""
        self.stop()
        self._commands.put(_Unload())

    # -- the bridge thread --------------------------------------------------------------------

    def _handle(self, command: object) -> None:
        if isinstance(command, _Unload):
            self._release()
            self._path = None
            self.unloaded.emit()
            return
        assert isinstance(command, _Load)
        self._load(command)

    def _release(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            except Exception:
                log.exception("closing the inference worker failed")
            self._client = None

    def _load(self, command: _Load) -> None:
        self._release()
        self._path = command.path
        self.loading.emit(command.path)
        try:
            client = RuntimeClient(command.path, settings=command.settings, sidecar=command.sidecar)
            info = client.load()
        except Exception as exc:
            self.load_failed.emit(_message(exc, "loading the model"))
            return
        self._client = client
        self.loaded.emit(info)

    def _run(self, ticket: ReplyTicket) -> None:
        client = self._client
        if client is None:
            self._fail(ticket, "no model is loaded; pick a model at the top of the chat window")
            return
        if client.info is None:  # the worker died: this request starts a fresh one
            self.loading.emit(self._path)
            try:
                self.loaded.emit(client.load())
            except Exception as exc:
                message = _message(exc, "loading the model again")
                self.load_failed.emit(message)
                self._fail(ticket, message)
                return
        try:
            stream = client.start(ticket.request)
        except Exception as exc:
            self._fail(ticket, _message(exc, "starting the reply"))
            return
        ticket._attach(stream)
        ticket.started.emit()
        recorder = ticket.recorder
        try:
            for chunk in stream:
                if recorder is not None:
                    record(lambda chunk=chunk: recorder.add(chunk))
                ticket.chunk.emit(chunk.text, chunk.stats)
        except Exception as exc:
            message = _message(exc, "generating")
            worker_died = client.info is None
            self._fail(ticket, f"{message}\n{crash_advice(message)}" if worker_died else message)
            return
        result = stream.result
        assert result is not None
        if recorder is not None:
            record(lambda: recorder.finish(result))
        ticket.finished.emit(result)


def record(write: Callable[[], None]) -> None:
    """History writes must not kill the bridge thread; a failure is logged (the text is shown)."""
    try:
        write()
    except Exception:
        log.exception("writing the reply into the chat history failed")


def _message(exc: BaseException, doing: str) -> str:
    if not isinstance(exc, MtpStudioError):
        log.error(
            "chat runtime failed while %s", doing, exc_info=(type(exc), exc, exc.__traceback__)
        )
    return readable(exc)
