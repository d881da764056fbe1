"""The JSON objects and server-sent events of Anthropic's Messages API, plus the ``mtp`` extension.

A whole reply is one ``message`` object. A stream is Anthropic's exact event sequence:
``message_start``, ``content_block_start``, ``ping``, ``content_block_delta`` (``text_delta``)
per piece, ``content_block_stop``, ``message_delta`` (``stop_reason``, ``stop_sequence``,
usage) and ``message_stop``; each written as ``event: NAME`` + ``data: JSON``. When the request
offers tools the reply is read for calls (:class:`ReplyBlocks`): text becomes a ``text`` block
and each call a ``tool_use`` block, streamed as it is written — its ``content_block_start`` as
soon as the name is known, the input in ``input_json_delta`` pieces, its ``content_block_stop``
when the call closes — and the stop reason is ``tool_use`` (``max_tokens`` when the length limit
cut the last call off; the call still comes, with the input written so far). A stream silent for
10 s gets a ``ping``. The MTP statistics ride in an ``mtp`` field of the message and of
``message_delta``, as on the OpenAI side (:mod:`~app.engine.server.openai.replies`).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from app.engine.runtime.chat_format.tool_call_events import (
    ArgumentsPiece,
    CallEnded,
    CallStarted,
    TextPiece,
)
from app.engine.runtime.core.request import GenerationResult
from app.engine.server.anthropic.tools import TOOL_USE_REASON, new_tool_use_id, tool_use_block
from app.engine.server.core.generation_flow import Finished
from app.engine.server.core.mtp_field import MTP_EXTENSION, mtp_extension
from app.engine.server.core.reply_stream import KeepAlive, ReplyEvent, WholeReply

_STOP_REASONS = {"length": "max_tokens", "context": "max_tokens"}
MAX_TOKENS_REASON = "max_tokens"


def new_message_id() -> str:
    return f"msg_{uuid.uuid4().hex[:24]}"


def stop_reason(finished: Finished, *, called: bool = False, complete: bool = True) -> str:
    """``tool_use`` when the reply made a call (``max_tokens`` when its last call was cut off),
    else ``stop_sequence``, ``max_tokens`` (also for a full context) or ``end_turn``."""
    if called:
        return TOOL_USE_REASON if complete else MAX_TOKENS_REASON
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


def message(message_id: str, model: str, reply: WholeReply) -> dict[str, Any]:
    """The whole reply: its text as a ``text`` block, its calls as ``tool_use`` blocks."""
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.content}]
    if reply.calls:
        text = reply.content.strip()
        content = [{"type": "text", "text": text}] if text else []
        content += [tool_use_block(call, new_tool_use_id()) for call in reply.calls]
    finished = reply.finished
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(
            finished, called=bool(reply.calls), complete=reply.calls_complete
        ),
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
        + PING
    )


def stream_closing(finished: Finished, blocks: ReplyBlocks) -> str:
    """The last block's ``content_block_stop``, ``message_delta`` (stop reason, usage, ``mtp``)
    and ``message_stop``."""
    closing = blocks.finish()
    reason = stop_reason(finished, called=blocks.called, complete=blocks.complete)
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": reason, "stop_sequence": finished.stop_sequence},
        "usage": usage(finished.result),
        MTP_EXTENSION: mtp_extension(finished.result.stats),
    }
    return closing + event("message_delta", delta) + event("message_stop", {"type": "message_stop"})


class ReplyBlocks:
    """The content-block events of a streamed reply. Plain text goes to one ``text`` block
    opened at once. A reply read for calls opens a ``text`` block when text comes, and a
    ``tool_use`` block as soon as a call's name is written, its input following in
    ``input_json_delta`` pieces; a reply with neither still gets its (empty) text block."""

    def __init__(self, *, reads_calls: bool) -> None:
        self._reads_calls = reads_calls
        self._index = 0
        self._open: str | None = None
        self.called = False
        self.complete = True

    def opening(self) -> str:
        return "" if self._reads_calls else self._start({"type": "text", "text": ""})

    def feed(self, reply_event: ReplyEvent) -> str:
        if isinstance(reply_event, KeepAlive):
            return PING
        if isinstance(reply_event, TextPiece):
            return self._text(reply_event.text)
        if isinstance(reply_event, CallStarted):
            block = {"type": "tool_use", "id": new_tool_use_id(), "name": reply_event.name}
            return self._stop() + self._start({**block, "input": {}})
        if isinstance(reply_event, ArgumentsPiece):
            partial = {"type": "input_json_delta", "partial_json": reply_event.text}
            return self._event("content_block_delta", delta=partial)
        if isinstance(reply_event, CallEnded):
            self.called = True
            self.complete = reply_event.complete
            return self._stop()
        return ""

    def finish(self) -> str:
        """The last block's stop (an empty text block first when nothing was written)."""
        events = ""
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


PING = event("ping", {"type": "ping"})
