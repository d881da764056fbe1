"""The chat window's link to a remote OpenAI-compatible server: one thread for all network I/O.

The same job as :class:`RuntimeBridge` for local models, with the same :class:`ReplyTicket`, so
the window streams, stops, records and shows a remote reply exactly as a local one. Checking a
connection (listing the server's models) and every reply run on this bridge's thread, in order;
results come back as signals delivered on the GUI thread. Stop closes the HTTP stream, which
makes the server stop generating. Like the runtime bridge, it has no Qt parent, so closing the
window never deletes an object the thread still emits from.
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass, replace

from PySide6.QtCore import Signal

from app.engine.chat.connections import Connection
from app.engine.chat.remote_reply import remote_result, streaming_stats
from app.engine.errors import MtpStudioError, RemoteError
from app.engine.remote.client import RemoteEndpoint
from app.engine.runtime.core.request import TokenChunk
from app.ui.chat.bridges.runtime_bridge import ReplyBridge, ReplyTicket, record
from app.ui.errors import readable

log = logging.getLogger(__name__)

FIX_ADVICE = (
    "The conversation is kept. Check the server's URL, API key and model with "
    "“Connect to a server…” in the model list, then send again or press Regenerate."
)


@dataclass(frozen=True)
class _Check:
    connection: Connection


class RemoteBridge(ReplyBridge):
    """Talks to the chosen :class:`Connection` off the GUI thread.

    ``connected(connection, model)`` when the server answered its model list (``model``: the one
    replies will use); ``connect_failed(connection, message)`` when it did not.
    """

    connected = Signal(object, str)
    connect_failed = Signal(object, str)

    def __init__(self) -> None:
        self._endpoint: RemoteEndpoint | None = None
        self._connection: Connection | None = None
        super().__init__("chat-remote")

    def use(self, connection: Connection) -> None:
        """Replies go to ``connection`` from now on; its server is checked first."""
        self.stop()
        self._commands.put(_Check(connection))

    # -- the bridge thread --------------------------------------------------------------------

    def _handle(self, command: object) -> None:
        assert isinstance(command, _Check)
        self._check(command.connection)

    def _release(self) -> None:
        if self._endpoint is not None:
            self._endpoint.close()
            self._endpoint = None

    def _check(self, connection: Connection) -> None:
        self._release()
        self._connection = connection
        try:
            self._endpoint = RemoteEndpoint(
                connection.url, api_key=connection.api_key, model=connection.model
            )
            served = self._endpoint.models()
            if connection.model is not None and connection.model not in served:
                raise RemoteError(
                    f"{connection.url} does not serve the model {connection.model!r} (it serves "
                    f"{', '.join(served) or 'none'}); choose one in “Connect to a server…”"
                )
            model = self._endpoint.model()
        except Exception as exc:
            self.connect_failed.emit(connection, _message(exc, "connecting"))
            return
        self.connected.emit(connection, model)

    def _run(self, ticket: ReplyTicket) -> None:
        endpoint, connection = self._endpoint, self._connection
        if endpoint is None or connection is None:
            self._fail(ticket, f"the server cannot be reached. {FIX_ADVICE}")
            return
        request = ticket.request
        # A seed is always sent (drawn when the settings say random), so the stored reply names
        # the seed it was asked with, as a local one does; a server may still ignore seeds.
        seed = request.sampler.seed if request.sampler.seed is not None else secrets.randbits(31)
        try:
            sampler = replace(request.sampler, seed=seed)
            stream = endpoint.chat(request.messages, sampler, request.max_tokens)
        except Exception as exc:
            self._fail(ticket, f"{_message(exc, 'starting the reply')}\n{FIX_ADVICE}")
            return
        ticket._attach(stream)
        ticket.started.emit()
        recorder = ticket.recorder
        started = time.monotonic()
        first = 0.0
        pieces = 0
        try:
            for piece in stream:
                now = time.monotonic()
                first = first or now
                pieces += 1
                stats = streaming_stats(pieces, first - started, now - started)
                if recorder is not None:
                    chunk = TokenChunk((), piece, stats)
                    record(lambda chunk=chunk: recorder.add(chunk))
                ticket.chunk.emit(piece, stats)
        except Exception as exc:
            self._fail(ticket, f"{_message(exc, 'generating')}\n{FIX_ADVICE}")
            return
        assert stream.reply is not None
        result = remote_result(stream.reply, connection.url, seed)
        if recorder is not None:
            record(lambda: recorder.finish(result))
        ticket.finished.emit(result)


def _message(exc: BaseException, doing: str) -> str:
    if not isinstance(exc, MtpStudioError):
        log.error(
            "the remote chat failed while %s", doing, exc_info=(type(exc), exc, exc.__traceback__)
        )
    return readable(exc)
