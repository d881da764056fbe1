"""The call blocks a model writes in its reply, and the readers of what is inside them.

Three formats are read. Inside ``<tool_call>…</tool_call>``: Hermes/Qwen (a JSON object with
``name`` and ``arguments``) and GLM-4.5 (the name, then ``<arg_key>k</arg_key><arg_value>v
</arg_value>`` pairs). Inside DeepSeek's ``<｜tool▁calls▁begin｜>…<｜tool▁calls▁end｜>``: one
``<｜tool▁call▁begin｜>…<｜tool▁call▁end｜>`` per call, as V3/R1 write it (``function<｜tool▁sep｜>
name`` then the arguments in a fenced json block) or as V3.1 does (``name<｜tool▁sep｜>
arguments``); this needs the markers in the text, which they are where the GGUF marks them as
user-defined tokens. A block left open at the end of the reply (the model ended its turn right
after the arguments) is read too. Text around the blocks is the reply's content. A block that
cannot be read stays in the content, so nothing the model wrote is lost. The reply itself is
read, whole or while it streams, by :mod:`.tool_call_events`.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from app.engine.runtime.chat_format.tools import CALL_CLOSE, CALL_OPEN, ToolCall

_GLM_ARGUMENT = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.DOTALL)
DEEPSEEK_OPEN, DEEPSEEK_CLOSE = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
_DEEPSEEK_CALL = re.compile(r"<｜tool▁call▁begin｜>(.*?)(?:<｜tool▁call▁end｜>|$)", re.DOTALL)
_DEEPSEEK_SEPARATOR = "<｜tool▁sep｜>"
_JSON_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


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


def parse_deepseek_block(body: str) -> list[ToolCall] | None:
    """The calls in DeepSeek's ``<｜tool▁calls▁begin｜>`` block; None if one is unreadable."""
    calls = []
    for inner in _DEEPSEEK_CALL.findall(body):
        head, separator, tail = inner.partition(_DEEPSEEK_SEPARATOR)
        if not separator:
            return None
        if head.strip() == "function":  # V3/R1: the name, then the arguments fenced
            name, _, arguments = tail.partition("\n")
            fenced = _JSON_FENCE.match(arguments)
            arguments = fenced.group(1) if fenced else arguments
        else:  # V3.1: name<｜tool▁sep｜>arguments
            name, arguments = head, tail
        try:
            value = json.loads(arguments)
        except ValueError:
            return None
        if not name.strip() or not isinstance(value, dict):
            return None
        calls.append(ToolCall(new_call_id(), name.strip(), json.dumps(value)))
    return calls or None


def _tool_call_block(body: str) -> list[ToolCall] | None:
    call = parse_block(body)
    return [call] if call is not None else None


@dataclass(frozen=True)
class BlockFormat:
    """A call block's opening and closing markers and the reader of what is between them (None
    when it cannot be read)."""

    opening: str
    closing: str
    read: Callable[[str], list[ToolCall] | None]


BLOCK_FORMATS = (
    BlockFormat(CALL_OPEN, CALL_CLOSE, _tool_call_block),
    BlockFormat(DEEPSEEK_OPEN, DEEPSEEK_CLOSE, parse_deepseek_block),
)


def _json_or_text(value: str) -> object:
    try:
        return json.loads(value)
    except ValueError:
        return value


def partial_marker_length(text: str) -> int:
    """How many characters at the end of ``text`` could begin a block's opening marker."""
    longest = max(len(block.opening) for block in BLOCK_FORMATS)
    for length in range(min(longest - 1, len(text)), 0, -1):
        if any(block.opening.startswith(text[-length:]) for block in BLOCK_FORMATS):
            return length
    return 0
