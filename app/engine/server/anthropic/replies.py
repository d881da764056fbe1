"""The JSON objects and server-sent events of Anthropic's Messages API, plus the ``mtp`` extension.

A whole reply is one ``message`` object. A stream is Anthropic's exact event sequence:
``message_start``, ``content_block_start``, ``ping``, ``content_block_delta`` (``text_delta``)
per piece, ``content_block_stop``, ``message_delta`` (``stop_reason``, ``stop_sequence``,
usage) and ``message_stop``; each written as ``event: NAME`` + ``data: JSON``. When the request
offers tools the reply is read for calls (:class:`ReplyBlocks`): text becomes a ``text`` block
and each call a ``tool_use`` block (streamed as its ``content_block_start``, the input as an
``input_json_delta``, and its ``content_block_stop``), and the stop reason is ``tool_use``. The
MTP statistics ride in an ``mtp`` field of the message and of ``message_delta``, as on the
OpenAI side (:mod:`~app.engine.server.openai.replies`).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from app.engine.runtime import ToolCallStream, parse_reply
from app.engine.runtime.core.request import GenerationResult
from app.engine.server.anthropic.tools import TOOL_USE_REASON, new_tool_use_id, tool_use_block
from app.engine.server.core.generation_flow import Finished
from app.engine.server.core.mtp_field import MTP_EXTENSION, mtp_extension

_STOP_REASONS = {"length": "max_tokens", "context": "max_tokens"}


def new_message_id() -> str:
    return f"msg_{uuid.uuid4().hex[:24]}"


def stop_reason(finished: Finished, *, called: bool = False) -> str:
    """``tool_use`` when the reply made a call, else ``stop_sequence``, ``max_tokens`` (also for
    a full context) or ``end_turn``."""
    if called:
        return TOOL_USE_REASON
    if finished.stopped_by_sequence:
        return "stop_sequence"
    return _STOP_REASONS.get(finished.result.finish_reason, "end_turn")


def usage(result: GenerationResult) -> dict[str, int]:
    cached = result.stats.prompt_reused_tokens
    return {
        "input_tokens": result.prompt_token_count - cached,
        "output_tokens": result.stats.generated_tokens,
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": 0,
    }


def message(
    message_id: str, model: str, text: str, finished: Finished, *, reads_calls: bool
) -> dict[str, Any]:
    """The whole reply; with ``reads_calls``, the calls in ``text`` as ``tool_use`` blocks."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    called = False
    if reads_calls:
        reply = parse_reply(text)
        called = bool(reply.tool_calls)
        content = [{"type": "text", "text": reply.content}] if reply.content or not called else []
        content += [tool_use_block(call, new_tool_use_id()) for call in reply.tool_calls]
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(finished, called=called),
        "stop_sequence": finished.stop_sequence,
        "usage": usage(finished.result),
        MTP_EXTENSION: mtp_extension(finished.result.stats),
    }


def stream_opening(message_id: str, model: str, prompt_tokens: int, blocks: ReplyBlocks) -> str:
    """``message_start``, the first block's ``content_block_start`` (unless the reply is read
    for calls: then its first block is not known yet) and a ``ping``."""
    start = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": prompt_tokens, "output_tokens": 0},
    }
    return (
        event("message_start", {"type": "message_start", "message": start})
        + blocks.opening()
        + event("ping", {"type": "ping"})
    )


def stream_closing(finished: Finished, blocks: ReplyBlocks) -> str:
    """The last block's ``content_block_stop``, ``message_delta`` (stop reason, usage, ``mtp``)
    and ``message_stop``."""
    closing = blocks.finish()
    reason = stop_reason(finished, called=blocks.called)
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": reason, "stop_sequence": finished.stop_sequence},
        "usage": usage(finished.result),
        MTP_EXTENSION: mtp_extension(finished.result.stats),
    }
    return closing + event("message_delta", delta) + event("message_stop", {"type": "message_stop"})


class ReplyBlocks:
    """The content-block events of a streamed reply. Plain text goes to one ``text`` block
    opened at once. A reply read for calls opens a ``text`` block when text comes, and writes
    each call as a ``tool_use`` block when its markup closes (the input in one
    ``input_json_delta``); a reply with neither still gets its (empty) text block."""

    def __init__(self, *, reads_calls: bool) -> None:
        self._calls = ToolCallStream() if reads_calls else None
        self._sent_calls = 0
        self._index = 0
        self._open: str | None = None
        self.called = False

    def opening(self) -> str:
        return "" if self._calls is not None else self._start({"type": "text", "text": ""})

    def feed(self, piece: str) -> str:
        if self._calls is None:
            return self._text(piece)
        return self._text(self._calls.feed(piece)) + self._new_calls()

    def finish(self) -> str:
        """The held-back text or a call left open at the end, then the last block's stop."""
        events = ""
        if self._calls is not None:
            tail, last = self._calls.finish()
            self._calls.calls.extend(last)
            events = self._text(tail) + self._new_calls()
        if self._open is None and self._index == 0:
            events += self._start({"type": "text", "text": ""})
        return events + self._stop()

    def _text(self, text: str) -> str:
        if not text:
            return ""
        opening = (
            "" if self._open == "text" else self._stop() + self._start({"type": "text", "text": ""})
        )
        delta = {"type": "text_delta", "text": text}
        return opening + self._event("content_block_delta", delta=delta)

    def _new_calls(self) -> str:
        assert self._calls is not None
        events = ""
        for call in self._calls.calls[self._sent_calls :]:
            block = tool_use_block(call, new_tool_use_id())
            partial = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            events += self._stop() + self._start({**block, "input": {}})
            events += self._event("content_block_delta", delta=partial)
            self._sent_calls += 1
            self.called = True
        return events

    def _start(self, block: dict[str, Any]) -> str:
        self._open = block["type"]
        return self._event("content_block_start", content_block=block)

    def _stop(self) -> str:
        if self._open is None:
            return ""
        stop = self._event("content_block_stop")
        self._open = None
        self._index += 1
        return stop

    def _event(self, name: str, **fields: Any) -> str:
        return event(name, {"type": name, "index": self._index, **fields})


def event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"
