"""A request that has to wait for its turn gets its response headers at once, and a stream gets
keep-alive comments while it waits.

A request's reply normally starts when its generation does, so an error known before any text is
an HTTP 4xx (:func:`~app.engine.server.core.generation_flow.first_event`). But a request queued
behind another one for the same model, or waiting for its model to load, may wait minutes, and a
client that receives nothing for that long gives up or looks hung. So when a job has not started
:data:`HEADERS_AFTER_SECONDS` after it was queued, the reply goes out now, status 200: a stream
sends an SSE comment (``: waiting for MODEL: 2 requests ahead``) every
:data:`WAITING_KEEP_ALIVE_SECONDS` until its first event, a whole reply sends a space (JSON allows
leading whitespace). An error that comes after that — the model failed to load, the worker died —
is written in the body in the API's error shape (a stream's error event; a whole reply's error
object). A client that disconnects while it waits frees its place
(docs/server-api.md#several-clients).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from app.engine.server.core.api_errors import ApiError
from app.engine.server.core.generation_flow import (
    ClientGone,
    generation_failed,
    wait_for_disconnect,
)
from app.engine.server.core.scheduler import Job, JobEvent, JobFailed, Scheduler

HEADERS_AFTER_SECONDS = 0.5
"""A job not started by then gets its response headers without waiting for its turn."""
WAITING_KEEP_ALIVE_SECONDS = 5.0
"""How often a waiting stream hears that it still waits."""
JSON_KEEP_ALIVE = " "


@dataclass
class Waiting:
    """A job that had not started when its headers went out: its first event, still to come."""

    job: Job
    scheduler: Scheduler
    first: asyncio.Future[JobEvent]

    def describe(self) -> str:
        """``waiting for MODEL: 2 requests ahead`` (or ``loading the model``)."""
        ahead = self.scheduler.position(self.job)
        if self.scheduler.loading and not self.scheduler.running:
            why = "loading the model"
        elif ahead:
            why = f"{ahead} request{'s' if ahead != 1 else ''} ahead"
        else:
            why = "next in line"
        return f"waiting for {self.scheduler.model}: {why}"


async def first_or_waiting(
    request: Request,
    job: Job,
    scheduler: Scheduler,
    headers_after: float | None = HEADERS_AFTER_SECONDS,
) -> JobEvent | Waiting:
    """The job's first event, as :func:`first_event` gives it, when the job starts within
    ``headers_after`` seconds (None: however long it waits); else :class:`Waiting`. Raises
    :class:`ApiError` for a failure before then, :class:`ClientGone` for a client that left."""
    getting = asyncio.ensure_future(job.events.get())
    gone = asyncio.ensure_future(wait_for_disconnect(request))
    late = asyncio.ensure_future(_not_started_after(job, headers_after))
    try:
        await asyncio.wait({getting, gone, late}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        late.cancel()
    if getting.done():
        event = getting.result()
        if isinstance(event, JobFailed):
            raise generation_failed(event)
        return event
    if late.done() and not late.cancelled():
        return Waiting(job, scheduler, getting)
    getting.cancel()
    job.cancel()
    raise ClientGone


async def _not_started_after(job: Job, seconds: float | None) -> None:
    """Returns once ``seconds`` pass with the job not started; never returns otherwise."""
    if seconds is not None:
        try:
            await asyncio.wait_for(job.started.wait(), seconds)
        except TimeoutError:
            return
    await asyncio.Event().wait()


async def stream_after_waiting(
    waiting: Waiting,
    body: Callable[[JobEvent], AsyncIterator[str]],
    failure: Callable[[ApiError], str],
    on_gone: Callable[[], None],
) -> AsyncIterator[str]:
    """A stream's body: keep-alive comments until the first event, then ``body(first)`` (which
    handles its own end); a failure before it is ``failure(error)``, a client that leaves before
    it ``on_gone()``."""
    first_came = False
    try:
        async for item in _first_event(waiting, lambda: f": {waiting.describe()}\n\n"):
            if isinstance(item, str):
                yield item
                continue
            first_came = True
            if isinstance(item, JobFailed):
                yield failure(generation_failed(item))
            else:
                async for text in body(item):
                    yield text
    finally:
        if not first_came:
            waiting.job.cancel()
            on_gone()


async def json_after_waiting(
    waiting: Waiting,
    build: Callable[[JobEvent], Awaitable[dict[str, Any]]],
    failure: Callable[[ApiError], dict[str, Any]],
    on_gone: Callable[[], None],
) -> AsyncIterator[str]:
    """A whole reply's body: spaces until the first event, then the JSON that ``build(first)``
    makes; a failure is ``failure(error)`` (the API's error object), a client that leaves first
    ``on_gone()``."""
    finished = False
    try:
        async for item in _first_event(waiting, lambda: JSON_KEEP_ALIVE):
            if isinstance(item, str):
                yield item
                continue
            try:
                if isinstance(item, JobFailed):
                    raise generation_failed(item)
                reply = await build(item)
            except ApiError as error:
                reply = failure(error)
            finished = True
            yield json.dumps(reply)
    finally:
        if not finished:
            waiting.job.cancel()
            on_gone()


async def _first_event(
    waiting: Waiting, keep_alive: Callable[[], str]
) -> AsyncIterator[str | JobEvent]:
    """A keep-alive now and every :data:`WAITING_KEEP_ALIVE_SECONDS`, then the first event."""
    yield keep_alive()
    first = waiting.first
    try:
        while True:
            try:
                event = await asyncio.wait_for(asyncio.shield(first), WAITING_KEEP_ALIVE_SECONDS)
            except TimeoutError:
                yield keep_alive()
                continue
            yield event
            return
    finally:
        if not first.done():
            first.cancel()
