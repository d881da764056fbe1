"""Tool calls out of a model's reply text, whole or while it streams.

Two formats are read, both inside ``<tool_call>…</tool_call>``: Hermes/Qwen (a JSON object with
``name`` and ``arguments``) and GLM-4.5 (the name, then ``<arg_key>k</arg_key><arg_value>v
</arg_value>`` pairs). A block left open at the end of the reply (the model ended its turn right
after the arguments) is read too. Text around the blocks is the reply's content. A block that
cannot be read stays in the content, so nothing the model wrote is lost.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass

from app.engine.runtime.tools import CALL_CLOSE, CALL_OPEN, ToolCall

_GLM_ARGUMENT = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.DOTALL)


@dataclass(frozen=True)
class ParsedReply:
    """``content`` None when the reply held nothing but calls."""

    content: str | None
    tool_calls: tuple[ToolCall, ...]


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def parse_block(body: str) -> ToolCall | None:
    """The call inside one ``<tool_call>`` block, or None when it is neither format."""
    body = body.strip()
    if body.startswith("{"):
        try:
            value = json.loads(body)
        except ValueError:
            return None
        if not isinstance(value, dict) or not isinstance(value.get("name"), str):
            return None
        arguments = value.get("arguments", value.get("parameters", {}))
        if isinstance(arguments, str):
            arguments = _json_or_text(arguments)
        return ToolCall(new_call_id(), value["name"], json.dumps(arguments))
    name, _, rest = body.partition("\n")
    if not name.strip() or (rest.strip() and "<arg_key>" not in rest):
        return None
    arguments = {key.strip(): _json_or_text(value) for key, value in _GLM_ARGUMENT.findall(rest)}
    return ToolCall(new_call_id(), name.strip(), json.dumps(arguments))


def _json_or_text(value: str) -> object:
    try:
        return json.loads(value)
    except ValueError:
        return value


def parse_reply(text: str) -> ParsedReply:
    """Split a whole reply into its content (as written when there are no calls, else trimmed
    of the blank lines the blocks leave) and its calls."""
    stream = ToolCallStream()
    pieces = [stream.feed(text)]
    calls = list(stream.calls)
    tail, last = stream.finish()
    pieces.append(tail)
    calls.extend(last)
    content = "".join(pieces)
    if not calls:
        return ParsedReply(content, ())
    return ParsedReply(content.strip() or None, tuple(calls))


class ToolCallStream:
    """Feeds reply text as it arrives; releases content text at once, holds back anything that
    may be a call, and collects calls as their blocks close (read :attr:`calls` after each
    :meth:`feed`: the calls found so far, in order)."""

    def __init__(self) -> None:
        self._pending = ""
        self.calls: list[ToolCall] = []

    def feed(self, text: str) -> str:
        """Add ``text``; return the content that is certainly not part of a call."""
        self._pending += text
        released: list[str] = []
        while True:
            start = self._pending.find(CALL_OPEN)
            if start < 0:
                keep = _partial_marker_length(self._pending)
                released.append(self._pending[: len(self._pending) - keep])
                self._pending = self._pending[len(self._pending) - keep :]
                return "".join(released)
            end = self._pending.find(CALL_CLOSE, start)
            if end < 0:
                released.append(self._pending[:start])
                self._pending = self._pending[start:]
                return "".join(released)
            block = self._pending[start + len(CALL_OPEN) : end]
            call = parse_block(block)
            if call is None:
                released.append(self._pending[: end + len(CALL_CLOSE)])
            else:
                released.append(self._pending[:start])
                self.calls.append(call)
            self._pending = self._pending[end + len(CALL_CLOSE) :]

    def finish(self) -> tuple[str, list[ToolCall]]:
        """At the end of the reply: the held-back text and a call left open, if it is one."""
        pending, self._pending = self._pending, ""
        if pending.startswith(CALL_OPEN):
            call = parse_block(pending[len(CALL_OPEN) :])
            if call is not None:
                return "", [call]
        return pending, []


def _partial_marker_length(text: str) -> int:
    """How many characters at the end of ``text`` could begin ``<tool_call>``."""
    for length in range(min(len(CALL_OPEN) - 1, len(text)), 0, -1):
        if CALL_OPEN.startswith(text[-length:]):
            return length
    return 0
