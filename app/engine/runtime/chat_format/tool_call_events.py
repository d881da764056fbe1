"""Tool calls read out of a reply as it is generated: the name as soon as it is written, then
the arguments piece by piece, so every API can stream a long call instead of sending it in one
burst at the end (OpenAI's argument deltas, Anthropic's ``input_json_delta``, the Responses
API's ``function_call_arguments.delta``).

A Hermes/Qwen block (``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, the format
forced calls are written in) streams: :class:`CallStarted` once its name is complete, then
:class:`ArgumentsPiece`\\ s with the arguments' JSON text exactly as the model writes it, then
:class:`CallEnded` with the whole call. Blocks in the other formats
(:mod:`.tool_call_parser`: GLM's ``<arg_key>`` pairs, DeepSeek's markers) are read when they
close and come as the same three events at once. Text around the blocks is
:class:`TextPiece`\\ s, released at once unless it may begin a block's marker.

At the end of a reply (:meth:`ToolCallEvents.finish`), a call whose arguments were cut off is
still a call (``complete`` False: the arguments are the JSON text written so far), and a block
too short to name its function is dropped when the reply was cut by its length limit — never
returned as raw ``<tool_call>`` text; otherwise an unreadable block stays text, as in
:func:`parse_reply`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from app.engine.runtime.chat_format.tool_call_parser import (
    BLOCK_FORMATS,
    BlockFormat,
    new_call_id,
    partial_marker_length,
)
from app.engine.runtime.chat_format.tools import CALL_OPEN, ToolCall

_STREAMED_HEAD = re.compile(
    r'\s*\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"(?:arguments|parameters)"\s*:\s*'
)
_ARGUMENTS_KEY = re.compile(r'"(?:arguments|parameters)"\s*:')


@dataclass(frozen=True)
class TextPiece:
    text: str


@dataclass(frozen=True)
class CallStarted:
    index: int
    id: str
    name: str


@dataclass(frozen=True)
class ArgumentsPiece:
    index: int
    text: str


@dataclass(frozen=True)
class CallEnded:
    """``complete`` False: the reply ended inside the arguments (cut by its length limit)."""

    index: int
    call: ToolCall
    complete: bool = True


CallEvent = TextPiece | CallStarted | ArgumentsPiece | CallEnded


@dataclass(frozen=True)
class ParsedReply:
    """``content`` None when the reply held nothing but calls."""

    content: str | None
    tool_calls: tuple[ToolCall, ...]
    complete: bool = True
    """False when the last call was cut off (its arguments are unfinished JSON)."""


@dataclass
class _JsonEnd:
    """Finds where one JSON value ends, a character at a time (strings and escapes aware)."""

    depth: int = 0
    in_string: bool = False
    escaped: bool = False
    started: bool = False

    def take(self, text: str) -> int:
        """How many characters of ``text`` belong to the value (all of them while it is open;
        :attr:`done` says whether it closed)."""
        for position, char in enumerate(text):
            self.started = True
            if self.in_string:
                if self.escaped:
                    self.escaped = False
                elif char == "\\":
                    self.escaped = True
                elif char == '"':
                    self.in_string = False
            elif char == '"':
                self.in_string = True
            elif char in "{[":
                self.depth += 1
            elif char in "}]":
                self.depth -= 1
                if self.depth == 0:
                    return position + 1
        return len(text)

    @property
    def done(self) -> bool:
        return self.started and self.depth == 0 and not self.in_string


@dataclass
class _Block:
    """An open call block: its format, the text inside it so far and, once its head is read, the
    call it streams."""

    format: BlockFormat
    body: str = ""
    streamed: CallStarted | None = None
    arguments: str = ""
    scan: _JsonEnd = field(default_factory=_JsonEnd)
    arguments_at: int = 0
    """Where the arguments start in :attr:`body` (once the head is read)."""
    consumed: int = 0
    """How much of :attr:`body` has been read as arguments."""


class ToolCallEvents:
    """Feed reply text as it comes; each :meth:`feed` returns the events it completes.
    :attr:`calls` holds the calls ended so far."""

    def __init__(self) -> None:
        self._pending = ""
        self._block: _Block | None = None
        self.calls: list[ToolCall] = []

    def feed(self, text: str) -> list[CallEvent]:
        events: list[CallEvent] = []
        self._pending += text
        while self._pending:
            if self._block is None:
                if not self._outside(events):
                    break
            elif not self._inside(self._block, events):
                break
        return events

    def finish(self, *, cut: bool = False) -> list[CallEvent]:
        """The events the end of the reply completes; ``cut``: it ended at its length limit."""
        events: list[CallEvent] = []
        block, pending, self._pending = self._block, self._pending, ""
        self._block = None
        if block is None:
            return [TextPiece(pending)] if pending else []
        block.body += pending
        if block.streamed is not None:
            self._stream_arguments(block, events)
            events.append(self._end(block, complete=block.scan.done))
            return events
        calls = block.format.read(block.body)
        if calls is not None:
            self._whole_calls(calls, events)
        elif not cut:
            events.append(TextPiece(block.format.opening + block.body))
        return events

    # --- outside a block ---------------------------------------------------------------------

    def _outside(self, events: list[CallEvent]) -> bool:
        """Release text up to the next block; False when more text is needed."""
        found = [(self._pending.find(f.opening), f) for f in BLOCK_FORMATS]
        found = [(start, f) for start, f in found if start >= 0]
        if not found:
            keep = partial_marker_length(self._pending)
            released = self._pending[: len(self._pending) - keep]
            self._pending = self._pending[len(self._pending) - keep :]
            if released:
                events.append(TextPiece(released))
            return False
        start, block_format = min(found, key=lambda item: item[0])
        if start:
            events.append(TextPiece(self._pending[:start]))
        self._pending = self._pending[start + len(block_format.opening) :]
        self._block = _Block(block_format)
        return True

    # --- inside a block ----------------------------------------------------------------------

    def _inside(self, block: _Block, events: list[CallEvent]) -> bool:
        """Read the pending text into ``block``; False when more text is needed."""
        block.body += self._pending
        self._pending = ""
        if block.streamed is None and block.format.opening == CALL_OPEN:
            self._try_head(block, events)
        if block.streamed is not None:
            self._stream_arguments(block, events)
        end = block.body.find(block.format.closing, block.arguments_at + len(block.arguments))
        if end < 0 or (block.streamed is not None and not block.scan.done):
            return False
        body, self._pending = block.body[:end], block.body[end + len(block.format.closing) :]
        self._block = None
        if block.streamed is not None:
            events.append(self._end(block, complete=True))
            return True
        calls = block.format.read(body)
        if calls is None:  # unreadable: it stays text, so nothing the model wrote is lost
            events.append(TextPiece(block.format.opening + body + block.format.closing))
        else:
            self._whole_calls(calls, events)
        return True

    def _try_head(self, block: _Block, events: list[CallEvent]) -> None:
        """Start streaming once ``{"name": "...", "arguments": {`` is written."""
        head = _STREAMED_HEAD.match(block.body)
        if head is None or len(block.body) == head.end():
            return
        if block.body[head.end()] != "{":  # arguments as a string: read when the block closes
            return
        name = json.loads(head.group(1))
        if not isinstance(name, str):
            return
        block.streamed = CallStarted(len(self.calls), new_call_id(), name)
        block.arguments_at = block.consumed = head.end()
        events.append(block.streamed)

    def _stream_arguments(self, block: _Block, events: list[CallEvent]) -> None:
        assert block.streamed is not None
        if block.scan.done:
            return
        fresh = block.body[block.consumed :]
        taken = fresh[: block.scan.take(fresh)]
        block.consumed += len(taken)
        if taken:
            block.arguments += taken
            events.append(ArgumentsPiece(block.streamed.index, taken))

    def _end(self, block: _Block, *, complete: bool) -> CallEnded:
        assert block.streamed is not None
        arguments = block.arguments
        if complete:
            try:
                arguments = json.dumps(json.loads(arguments))
            except ValueError:
                complete = False
        call = ToolCall(block.streamed.id, block.streamed.name, arguments)
        self.calls.append(call)
        return CallEnded(block.streamed.index, call, complete)

    def _whole_calls(self, calls: list[ToolCall], events: list[CallEvent]) -> None:
        for call in calls:
            index = len(self.calls)
            self.calls.append(call)
            events += [
                CallStarted(index, call.id, call.name),
                ArgumentsPiece(index, call.arguments),
                CallEnded(index, call),
            ]


def parse_reply(text: str, *, cut: bool = False) -> ParsedReply:
    """Split a whole reply into its content (as written when there are no calls, else trimmed
    of the blank lines the blocks leave) and its calls; ``cut``: it ended at its length
    limit."""
    reader = ToolCallEvents()
    events = reader.feed(text) + reader.finish(cut=cut)
    content = "".join(event.text for event in events if isinstance(event, TextPiece))
    ended = [event for event in events if isinstance(event, CallEnded)]
    if not ended:
        return ParsedReply(content, ())
    return ParsedReply(
        content.strip() or None,
        tuple(event.call for event in ended),
        complete=all(event.complete for event in ended),
    )
