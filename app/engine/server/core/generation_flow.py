"""A queued job's events as reply text, shared by the OpenAI and Anthropic endpoints.

:func:`first_event` waits for a job to start (or fail) while watching the client, so errors that
can be known before any text — a prompt longer than the context, a bad template — become an HTTP
4xx instead of a 200 followed by an error event, and a client that leaves while queued frees its
place. :func:`pieces` then turns the job's chunks into text released by the stop scanner, ending
with :class:`Finished`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from starlette.requests import Request

from app.engine.runtime.core.request import GenerationResult, TokenChunk
from app.engine.server.core.api_errors import ApiError
from app.engine.server.core.scheduler import Job, JobEvent, JobFailed
from app.engine.server.core.stop_strings import StopScanner

CLIENT_GONE_STATUS = 499  # nginx's "client closed request", for the log only


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


async def pieces(
    job: Job, stops: tuple[str, ...], first: JobEvent
) -> AsyncIterator[str | Finished]:
    """The text to send as it is released by the stop scanner, then :class:`Finished`."""
    scanner = StopScanner(stops)
    event = first
    while True:
        if isinstance(event, TokenChunk):
            text = scanner.feed(event.text)
            if scanner.stopped:
                job.cancel()
            if text:
                yield text
        elif isinstance(event, GenerationResult):
            tail = scanner.flush()
            if tail:
                yield tail
            yield Finished(event, scanner.matched)
            return
        else:
            raise generation_failed(event)
        event = await job.events.get()


async def collect(job: Job, stops: tuple[str, ...], first: JobEvent) -> tuple[str, Finished]:
    texts: list[str] = []
    async for piece in pieces(job, stops, first):
        if isinstance(piece, Finished):
            return "".join(texts), piece
        texts.append(piece)
    raise AssertionError("a job always ends with a result or a failure")


async def collect_unless_gone(
    request: Request, job: Job, stops: tuple[str, ...], first: JobEvent
) -> tuple[str, Finished]:
    """The whole reply; raises :class:`ClientGone` (after cancelling the job) if the client
    disconnects first."""
    collecting = asyncio.ensure_future(collect(job, stops, first))
    gone = asyncio.ensure_future(wait_for_disconnect(request))
    try:
        await asyncio.wait({collecting, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if not collecting.done():
        job.cancel()
        collecting.cancel()
        raise ClientGone
    return collecting.result()


async def wait_for_disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def generation_failed(failure: JobFailed) -> ApiError:
    if failure.unrunnable:  # nothing wrong with the request: this server cannot serve any
        return ApiError(503, failure.message, type_="server_error")
    if failure.user_error:
        return ApiError(400, failure.message)
    return ApiError(
        500,
        "the inference worker hit a bug; see the server log",
        type_="server_error",
        log_detail=failure.message,
    )
