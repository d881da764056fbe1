"""A running job's reply as the events every API writes: text, tool calls as they are written,
keep-alives, and the end.

The job's text goes through the stop scanner (the text before a stop string; the job is stopped
at a match) and, when the request offered tools, through the tool-call reader
(:class:`ToolCallEvents`): a call's name as soon as it is written, then its arguments piece by
piece, so a long call streams instead of arriving in one burst. After ``max_calls`` calls the
job is stopped and what follows is dropped (``parallel_tool_calls: false``). A call the length
limit cut off ends as an incomplete call, never as raw markup. While nothing has been sent for
:data:`KEEP_ALIVE_SECONDS`, a :class:`KeepAlive` is yielded so a stream can show it is alive (an
SSE comment, Anthropic's ``ping``). When the request asked for log-probabilities, a
:class:`TokenLogprobs` event carries the entries of the tokens whose text was just sent
(:mod:`.reply_logprobs`). :func:`whole_reply` gathers the same events for a reply sent in one
piece.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from starlette.requests import Request

from app.engine.runtime.chat_format.tool_call_events import (
    CallEnded,
    CallEvent,
    TextPiece,
    ToolCallEvents,
)
from app.engine.runtime.chat_format.tools import ToolCall
from app.engine.runtime.core.request import GenerationResult, TokenChunk
from app.engine.runtime.sampling.logprobs import TokenLogprob
from app.engine.server.core.generation_flow import (
    ClientGone,
    Finished,
    generation_failed,
    wait_for_disconnect,
)
from app.engine.server.core.reply_logprobs import LogprobAligner, TokenLogprobs
from app.engine.server.core.request_fields import ParsedRequest, parses_calls
from app.engine.server.core.scheduler import Job, JobEvent
from app.engine.server.core.stop_strings import StopScanner

KEEP_ALIVE_SECONDS = 10.0
CUT_REASONS = ("length", "context")
"""The runtime's finish reasons for a reply that its length limit (or the context) ended."""


@dataclass(frozen=True)
class KeepAlive:
    """Nothing was sent for :data:`KEEP_ALIVE_SECONDS`: the generation is still running."""


ReplyEvent = CallEvent | KeepAlive | TokenLogprobs | Finished


@dataclass(frozen=True)
class WholeReply:
    """A reply gathered whole: its text outside calls, its calls, and how it ended."""

    content: str
    calls: tuple[ToolCall, ...]
    calls_complete: bool
    finished: Finished
    logprobs: tuple[TokenLogprob, ...] = ()


def was_cut(finished: Finished) -> bool:
    return not finished.stopped_by_sequence and finished.result.finish_reason in CUT_REASONS


class _Reader:
    """The job's text → events, honouring stop strings and ``max_calls``."""

    def __init__(self, job: Job, parsed: ParsedRequest) -> None:
        self._job = job
        self._scanner = StopScanner(parsed.stop)
        self._calls = ToolCallEvents() if parses_calls(parsed.generation) else None
        self._max_calls = parsed.max_calls
        self._ended = 0
        self._logprobs = LogprobAligner()

    @property
    def _calls_done(self) -> bool:
        return self._max_calls is not None and self._ended >= self._max_calls

    def text(self, chunk: TokenChunk) -> list[ReplyEvent]:
        self._logprobs.add(chunk.logprobs)
        text = self._scanner.feed(chunk.text)
        if self._scanner.stopped:
            self._job.cancel()
        return [*self._entries(self._logprobs.covered(text)), *self._events(text)]

    def end(self, result: GenerationResult) -> list[ReplyEvent]:
        text = self._scanner.flush()
        entries = self._logprobs.covered(text)
        if self._scanner.matched is None:
            entries += self._logprobs.rest()
        events: list[ReplyEvent] = [*self._entries(entries), *self._events(text)]
        finished = Finished(result, self._scanner.matched)
        if self._calls is not None and not self._calls_done:
            events += self._limited(self._calls.finish(cut=was_cut(finished)))
        return [*events, finished]

    @staticmethod
    def _entries(entries: tuple[TokenLogprob, ...]) -> list[ReplyEvent]:
        return [TokenLogprobs(entries)] if entries else []

    def _events(self, text: str) -> list[CallEvent]:
        if not text:
            return []
        if self._calls is None:
            return [TextPiece(text)]
        if self._calls_done:
            return []
        return self._limited(self._calls.feed(text))

    def _limited(self, events: list[CallEvent]) -> list[CallEvent]:
        kept: list[CallEvent] = []
        for event in events:
            if self._calls_done:
                break
            kept.append(event)
            if isinstance(event, CallEnded):
                self._ended += 1
                if self._calls_done:
                    self._job.cancel()
        return kept


async def reply_events(
    job: Job,
    parsed: ParsedRequest,
    first: JobEvent,
    keep_alive_seconds: float = KEEP_ALIVE_SECONDS,
) -> AsyncIterator[ReplyEvent]:
    """The reply's events from the job's ``first`` event on, ending with :class:`Finished`;
    raises the job's failure as an :class:`ApiError`."""
    reader = _Reader(job, parsed)
    event = first
    last_sent = time.monotonic()
    while True:
        if isinstance(event, TokenChunk):
            for reply_event in reader.text(event):
                yield reply_event
                last_sent = time.monotonic()
        elif isinstance(event, GenerationResult):
            for reply_event in reader.end(event):
                yield reply_event
            return
        else:
            raise generation_failed(event)
        while True:
            quiet_for = max(0.0, last_sent + keep_alive_seconds - time.monotonic())
            try:
                event = await asyncio.wait_for(job.events.get(), quiet_for)
                break
            except TimeoutError:
                yield KeepAlive()
                last_sent = time.monotonic()


async def gathered_reply(job: Job, parsed: ParsedRequest, first: JobEvent) -> WholeReply:
    """The whole reply (the caller watches the client)."""
    texts: list[str] = []
    ended: list[CallEnded] = []
    logprobs: list[TokenLogprob] = []
    async for event in reply_events(job, parsed, first):
        if isinstance(event, TextPiece):
            texts.append(event.text)
        elif isinstance(event, TokenLogprobs):
            logprobs.extend(event.entries)
        elif isinstance(event, CallEnded):
            ended.append(event)
        elif isinstance(event, Finished):
            return WholeReply(
                "".join(texts),
                tuple(end.call for end in ended),
                all(end.complete for end in ended),
                event,
                tuple(logprobs),
            )
    raise AssertionError("a job always ends with a result or a failure")


async def whole_reply(
    request: Request, job: Job, parsed: ParsedRequest, first: JobEvent
) -> WholeReply:
    """The whole reply; raises :class:`ClientGone` (after cancelling the job) if the client
    disconnects first."""
    gathering = asyncio.ensure_future(gathered_reply(job, parsed, first))
    gone = asyncio.ensure_future(wait_for_disconnect(request))
    try:
        await asyncio.wait({gathering, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if not gathering.done():
        job.cancel()
        gathering.cancel()
        raise ClientGone
    return gathering.result()
