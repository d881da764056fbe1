"""A response streamed as the Responses API's events, numbered by ``sequence_number``.

``response.created`` and ``response.in_progress``; for text, a ``message`` item
(``response.output_item.added``, ``response.content_part.added``, ``response.output_text.delta``
per piece, then ``…output_text.done``, ``…content_part.done``, ``…output_item.done``); for each
call, a ``function_call`` item added as soon as its name is written, its arguments in
``response.function_call_arguments.delta`` pieces, then ``…arguments.done`` and
``…output_item.done``; at the end ``response.completed`` (or ``response.incomplete``) with the
whole response. A stream silent for 10 s gets an SSE comment. Each event is written as
``event: TYPE`` + ``data: JSON``. With log-probabilities asked for, each text delta carries the
entries of its text, and the message item all of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.engine.runtime.chat_format.tool_call_events import (
    ArgumentsPiece,
    CallEnded,
    CallStarted,
    TextPiece,
)
from app.engine.runtime.chat_format.tools import ToolCall
from app.engine.server.core.generation_flow import Finished
from app.engine.server.core.reply_logprobs import TokenLogprobs, chat_entry
from app.engine.server.core.reply_stream import KeepAlive, ReplyEvent
from app.engine.server.responses.objects import (
    COMPLETED,
    IN_PROGRESS,
    INCOMPLETE,
    function_call_item,
    message_item,
    new_id,
)

KEEP_ALIVE_COMMENT = ": keep-alive\n\n"
ResponseBody = Callable[[list[dict[str, Any]], Finished | None, bool], dict[str, Any]]
"""Builds the response object from its output items (and, at the end, how it finished)."""


@dataclass
class _OpenItem:
    item_id: str
    index: int
    text: str = ""
    call: CallStarted | None = None
    logprobs: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ResponseEvents:
    """The events of one streamed response; :attr:`output` holds its finished items."""

    body: ResponseBody
    output: list[dict[str, Any]] = field(default_factory=list)
    calls_complete: bool = True
    _sequence: int = 0
    _open: _OpenItem | None = None
    _logprobs: list[dict[str, Any]] = field(default_factory=list)
    """Entries of text not sent yet (they go with the next delta)."""

    def opening(self) -> str:
        response = self.body([], None, True)
        return self._event("response.created", response=response) + self._event(
            "response.in_progress", response=response
        )

    def feed(self, event: ReplyEvent) -> str:
        if isinstance(event, KeepAlive):
            return KEEP_ALIVE_COMMENT
        if isinstance(event, TokenLogprobs):
            self._logprobs += [chat_entry(entry) for entry in event.entries]
            return ""
        if isinstance(event, TextPiece):
            return self._text(event.text)
        if isinstance(event, CallStarted):
            return self._close_message() + self._call_started(event)
        if isinstance(event, ArgumentsPiece) and self._open is not None:
            self._open.text += event.text
            return self._event(
                "response.function_call_arguments.delta",
                item_id=self._open.item_id,
                output_index=self._open.index,
                delta=event.text,
            )
        if isinstance(event, CallEnded):
            return self._call_ended(event)
        return ""

    def closing(self, finished: Finished) -> str:
        events = self._close_message()
        response = self.body(self.output, finished, self.calls_complete)
        kind = "response.completed" if response["status"] == COMPLETED else "response.incomplete"
        return events + self._event(kind, response=response)

    def error(self, message: str, code: str) -> str:
        """The stream's ``error`` event, for a generation that failed after it began."""
        return self._event("error", code=code, message=message, param=None)

    def _text(self, text: str) -> str:
        if not text:
            return ""
        events = ""
        if self._open is None:
            self._open = _OpenItem(new_id("msg"), len(self.output))
            events += self._event(
                "response.output_item.added",
                output_index=self._open.index,
                item=message_item(self._open.item_id, "", IN_PROGRESS),
            )
            events += self._event("response.content_part.added", **self._part(""))
        self._open.text += text
        logprobs, self._logprobs = self._logprobs, []
        self._open.logprobs += logprobs
        return events + self._event(
            "response.output_text.delta", **self._where(), delta=text, logprobs=logprobs
        )

    def _close_message(self) -> str:
        item = self._open
        if item is None or item.call is not None:
            return ""
        self._open = None
        done = message_item(item.item_id, item.text, COMPLETED, item.logprobs)
        self.output.append(done)
        where = {"item_id": item.item_id, "output_index": item.index, "content_index": 0}
        logprobs = item.logprobs
        return (
            self._event("response.output_text.done", **where, text=item.text, logprobs=logprobs)
            + self._event("response.content_part.done", **where, part=done["content"][0])
            + self._event("response.output_item.done", output_index=item.index, item=done)
        )

    def _call_started(self, event: CallStarted) -> str:
        self._open = _OpenItem(new_id("fc"), len(self.output), call=event)
        item = function_call_item(
            self._open.item_id, ToolCall(event.id, event.name, ""), IN_PROGRESS
        )
        return self._event("response.output_item.added", output_index=self._open.index, item=item)

    def _call_ended(self, event: CallEnded) -> str:
        item = self._open
        self._open = None
        if item is None:
            return ""
        self.calls_complete = event.complete
        done = function_call_item(
            item.item_id, event.call, COMPLETED if event.complete else INCOMPLETE
        )
        self.output.append(done)
        where = {"item_id": item.item_id, "output_index": item.index}
        return self._event(
            "response.function_call_arguments.done",
            **where,
            name=event.call.name,
            arguments=event.call.arguments,
        ) + self._event("response.output_item.done", output_index=item.index, item=done)

    def _where(self) -> dict[str, Any]:
        assert self._open is not None
        return {"item_id": self._open.item_id, "output_index": self._open.index, "content_index": 0}

    def _part(self, text: str) -> dict[str, Any]:
        part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
        return {**self._where(), "part": part}

    def _event(self, kind: str, **fields: Any) -> str:
        data = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return f"event: {kind}\ndata: {json.dumps(data)}\n\n"
