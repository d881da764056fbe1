"""What every generation route does around its API's own objects: read the request, then answer
it once its job has started.

The OpenAI, Anthropic and Responses routes read a request alike (:func:`received`: the JSON
body, the model it names, a clock started for the request log) and answer alike
(:class:`RouteReply`): a stream of events or a JSON body, either held open while the request
waits for its turn (:mod:`.waiting_reply`), or the whole reply at once; a failure after the
headers went out is logged and sent in the API's shape, a client that left is logged as gone.
What differs — the API's reply objects and events — is its subclass's.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from app.engine.server.core.api_errors import ApiError
from app.engine.server.core.generation_flow import CLIENT_GONE_STATUS
from app.engine.server.core.model_directory import RequestModel
from app.engine.server.core.reply_stream import WholeReply, gathered_reply, whole_reply
from app.engine.server.core.request_fields import ParsedRequest
from app.engine.server.core.scheduler import Job, JobEvent
from app.engine.server.core.waiting_reply import Waiting, json_after_waiting, stream_after_waiting

if TYPE_CHECKING:
    from app.engine.server.core.server import ApiServer


@dataclass(frozen=True)
class Received:
    """A generation request as it arrived: its JSON body, the model it names, when it came."""

    body: Any
    target: RequestModel
    started: float


async def received(server: ApiServer, request: Request) -> Received:
    """The body and the model it names (the API's errors for a bad body or an unknown model);
    the request is logged by its reply, not by the endpoint wrapper."""
    request.state.logged = False
    started = time.monotonic()
    body = await server.body(request)
    return Received(body, await server.model_for(body), started)


@dataclass(frozen=True)
class Running:
    """A request whose generation started: what its reply is made of."""

    server: ApiServer
    request: Request
    job: Job
    parsed: ParsedRequest
    model: str
    started: float
    first: JobEvent | Waiting


async def running(
    server: ApiServer, request: Request, arrived: Received, parsed: ParsedRequest, endpoint: str
) -> Running:
    """The generation ``parsed`` asks for, started on the model the request names."""
    target = arrived.target
    job, first = await server.start(request, parsed, target, endpoint)
    return Running(server, request, job, parsed, target.id, arrived.started, first)


class RouteReply(ABC):
    """One request's reply once its job started, whole or streamed."""

    def __init__(self, run: Running) -> None:
        self._server = run.server
        self._request = run.request
        self._job = run.job
        self._parsed = run.parsed
        self._model = run.model
        self._started = run.started
        self._first = run.first

    @abstractmethod
    def whole(self, reply: WholeReply) -> dict[str, Any]:
        """The API's whole reply (logged)."""

    @abstractmethod
    def events(self, first: JobEvent) -> AsyncIterator[str]:
        """The API's stream of events from the job's first event on (logged at its end)."""

    @abstractmethod
    def failed_event(self, error: ApiError) -> str:
        """The stream's last event when the job failed before it started streaming (logged)."""

    def error_body(self, error: ApiError) -> dict[str, Any]:
        """The API's error object."""
        return error.body()

    async def response(self) -> Response:
        first = self._first
        if self._parsed.stream:
            if isinstance(first, Waiting):
                events = stream_after_waiting(first, self.events, self.failed_event, self.gone)
            else:
                events = self.events(first)
            return StreamingResponse(events, media_type="text/event-stream")
        if isinstance(first, Waiting):
            whole = json_after_waiting(first, self.gathered, self.failed_body, self.gone)
            return StreamingResponse(whole, media_type="application/json")
        reply = await whole_reply(self._request, self._job, self._parsed, first)
        return JSONResponse(self.whole(reply))

    async def gathered(self, first: JobEvent) -> dict[str, Any]:
        """The whole reply after waiting: the stream watches the client."""
        return self.whole(await gathered_reply(self._job, self._parsed, first))

    def failed_body(self, error: ApiError) -> dict[str, Any]:
        """A failure after the headers went out: logged, and the API's error object."""
        self.log_failure(error)
        return self.error_body(error)

    def log_failure(self, error: ApiError) -> None:
        self._server.log_plain(self._request, error.status, self._started, error.log_detail)

    def gone(self) -> None:
        self._server.log_plain(
            self._request, CLIENT_GONE_STATUS, self._started, "client disconnected"
        )
