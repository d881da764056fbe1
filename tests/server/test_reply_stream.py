"""A job's reply as every API's stream writes it (:mod:`app.engine.server.core.reply_stream`):
calls stream as they are written, ``max_calls`` stops the job after that many, a call the length
limit cut off ends as an incomplete call, and a quiet stream gets keep-alives — in the wire
formats each API's clients read (an SSE comment, Anthropic's ``ping``).

A real :class:`Job` is fed the chunks a worker would post (the scheduler posts them the same
way), so these run without a model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

from app.engine.runtime.chat_format.tool_call_events import (
    ArgumentsPiece,
    CallEnded,
    CallStarted,
    TextPiece,
)
from app.engine.runtime.chat_format.tools import ToolChoice, ToolSpec
from app.engine.runtime.core.request import GenerationRequest, GenerationResult, TokenChunk
from app.engine.runtime.core.stats import StatsRecorder
from app.engine.server.anthropic.replies import PING, ReplyBlocks
from app.engine.server.core.generation_flow import Finished
from app.engine.server.core.reply_stream import KeepAlive, ReplyEvent, reply_events
from app.engine.server.core.request_fields import ParsedRequest
from app.engine.server.core.scheduler import Job
from app.engine.server.responses.events import KEEP_ALIVE_COMMENT, ResponseEvents

TOOL = ToolSpec("get_weather", "", json.dumps({"type": "object"}))
TWO_CALLS = (
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>'
)


def _parsed(max_calls: int | None = None) -> ParsedRequest:
    request = GenerationRequest(
        messages=(), prompt="x", tools=(TOOL,), tool_choice=ToolChoice("auto")
    )
    return ParsedRequest(None, request, (), stream=True, include_usage_chunk=False,
                         max_calls=max_calls)  # fmt: skip


def _result(reason: str) -> GenerationResult:
    stats = StatsRecorder(mode="ar", depth=0).snapshot()
    return GenerationResult("", (), 1, reason, stats, seed=0)


def _events(
    pieces: Sequence[str],
    reason: str,
    *,
    max_calls: int | None = None,
    pause: float = 0.0,
    keep_alive: float = 10.0,
) -> tuple[list[ReplyEvent], bool]:
    """The reply events of a job that writes ``pieces`` (``pause`` seconds apart) and ends for
    ``reason``; and whether the reader cancelled the job."""

    async def run() -> tuple[list[ReplyEvent], bool]:
        loop = asyncio.get_running_loop()
        job = Job(_parsed(max_calls).generation, loop, lambda _job: None)
        stats = _result(reason).stats

        async def write() -> None:
            for piece in pieces[1:]:
                await asyncio.sleep(pause)
                job.events.put_nowait(TokenChunk((1,), piece, stats))
            await asyncio.sleep(pause)
            job.events.put_nowait(_result(reason))

        writer = asyncio.ensure_future(write())
        first = TokenChunk((1,), pieces[0], stats)
        events = [e async for e in reply_events(job, _parsed(max_calls), first, keep_alive)]
        await writer
        return events, job.cancelled

    return asyncio.run(run())


def test_a_call_streams_its_name_first_then_its_arguments_in_pieces() -> None:
    pieces = [TWO_CALLS[at : at + 7] for at in range(0, len(TWO_CALLS), 7)]
    events, cancelled = _events(pieces, "stop")
    started = [event for event in events if isinstance(event, CallStarted)]
    assert [event.name for event in started] == ["get_weather", "get_weather"]
    first = "".join(e.text for e in events if isinstance(e, ArgumentsPiece) and e.index == 0)
    assert json.loads(first) == {"city": "Oslo"}
    assert len([e for e in events if isinstance(e, ArgumentsPiece)]) > 4
    assert not any(isinstance(event, TextPiece) and "<tool" in event.text for event in events)
    assert isinstance(events[-1], Finished) and not cancelled


def test_max_calls_stops_the_job_after_that_many_calls() -> None:
    events, cancelled = _events([TWO_CALLS[:90], TWO_CALLS[90:]], "cancelled", max_calls=1)
    ended = [event for event in events if isinstance(event, CallEnded)]
    assert len(ended) == 1 and json.loads(ended[0].call.arguments) == {"city": "Oslo"}
    assert cancelled
    assert not any(isinstance(e, CallStarted) and e.index == 1 for e in events)


def test_a_call_the_length_limit_cut_off_ends_as_an_incomplete_call() -> None:
    events, _cancelled = _events(
        ["Let me see. ", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Os'],
        "length",
    )
    ended = [event for event in events if isinstance(event, CallEnded)]
    assert len(ended) == 1 and not ended[0].complete
    assert ended[0].call.arguments == '{"city": "Os'
    text = "".join(event.text for event in events if isinstance(event, TextPiece))
    assert text == "Let me see. "


def test_a_quiet_stream_gets_keep_alives_in_each_apis_wire_format() -> None:
    events, _cancelled = _events(["Hello", " world"], "stop", pause=0.3, keep_alive=0.1)
    assert any(isinstance(event, KeepAlive) for event in events)
    assert ReplyBlocks(reads_calls=False).feed(KeepAlive()) == PING
    assert ResponseEvents(lambda *_args: {}).feed(KeepAlive()) == KEEP_ALIVE_COMMENT
    assert KEEP_ALIVE_COMMENT.startswith(":")  # an SSE comment: clients skip it
