"""A queued job's start and failures, shared by every API's endpoints.

:func:`first_event` waits for a job to start (or fail) while watching the client, so errors that
can be known before any text — a prompt longer than the context, a bad template — become an HTTP
4xx instead of a 200 followed by an error event, and a client that leaves while queued frees its
place; :mod:`.reply_stream` then reads the reply. A failed job is an error in the shape of who
failed: the request (400), a bug (500), or a worker that died (503 with a retry hint: the next
request starts a fresh worker).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from starlette.requests import Request

from app.engine.runtime.core.request import GenerationResult
from app.engine.server.core.api_errors import ApiError
from app.engine.server.core.scheduler import Job, JobEvent, JobFailed

CLIENT_GONE_STATUS = 499  # nginx's "client closed request", for the log only
WORKER_RESTART_SECONDS = 2
"""The Retry-After of a request whose worker died: about the time a small model takes to load."""


@dataclass(frozen=True)
class Finished:
    result: GenerationResult
    stop_sequence: str | None
    """The stop sequence that ended the text, None when the model stopped by itself."""

    @property
    def stopped_by_sequence(self) -> bool:
        return self.stop_sequence is not None


class ClientGone(Exception):
    """The client disconnected before its whole reply was ready."""


async def first_event(request: Request, job: Job) -> JobEvent:
    """The job's first event; raises :class:`ApiError` if the job failed before producing text
    and :class:`ClientGone` (after cancelling the job) if the client left while it waited."""
    getting = asyncio.ensure_future(job.events.get())
    gone = asyncio.ensure_future(wait_for_disconnect(request))
    try:
        await asyncio.wait({getting, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if not getting.done():
        getting.cancel()
        job.cancel()
        raise ClientGone
    event = getting.result()
    if isinstance(event, JobFailed):
        raise generation_failed(event)
    return event


async def wait_for_disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def generation_failed(failure: JobFailed) -> ApiError:
    if failure.unrunnable:  # nothing wrong with the request: this server cannot serve any
        return ApiError(503, failure.message, type_="server_error")
    if failure.worker_stopped:
        return ApiError(
            503,
            f"{failure.message}; retry the request in a few seconds",
            type_="server_error",
            code="worker_stopped",
            headers={"Retry-After": str(WORKER_RESTART_SECONDS)},
        )
    if failure.user_error:
        return ApiError(400, failure.message)
    return ApiError(
        500,
        "the inference worker hit a bug; see the server log",
        type_="server_error",
        log_detail=failure.message,
    )
