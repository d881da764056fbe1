"""The JSON objects and server-sent events of Anthropic's Messages API, plus the ``mtp`` extension.

A whole reply is one ``message`` object. A stream is Anthropic's exact event sequence:
``message_start``, ``content_block_start``, ``ping``, ``content_block_delta`` (``text_delta``)
per piece, ``content_block_stop``, ``message_delta`` (``stop_reason``, ``stop_sequence``,
usage) and ``message_stop``; each written as ``event: NAME`` + ``data: JSON``. The MTP
statistics ride in an ``mtp`` field of the message and of ``message_delta``, as on the OpenAI
side (:mod:`replies`).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from app.engine.runtime.request import GenerationResult
from app.engine.server.generation_flow import Finished
from app.engine.server.replies import MTP_EXTENSION, mtp_extension

_STOP_REASONS = {"length": "max_tokens", "context": "max_tokens"}


def new_message_id() -> str:
    return f"msg_{uuid.uuid4().hex[:24]}"


def stop_reason(finished: Finished) -> str:
    """``stop_sequence``, ``max_tokens`` (also for a full context) or ``end_turn``."""
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


def message(message_id: str, model: str, text: str, finished: Finished) -> dict[str, Any]:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop_reason(finished),
        "stop_sequence": finished.stop_sequence,
        "usage": usage(finished.result),
        MTP_EXTENSION: mtp_extension(finished.result.stats),
    }


def stream_opening(message_id: str, model: str, prompt_tokens: int) -> str:
    """``message_start``, the text block's ``content_block_start`` and a ``ping``."""
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
        + event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        )
        + event("ping", {"type": "ping"})
    )


def text_delta(text: str) -> str:
    return event(
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
    )


def stream_closing(finished: Finished) -> str:
    """``content_block_stop``, ``message_delta`` (stop reason, usage, ``mtp``), ``message_stop``."""
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason(finished), "stop_sequence": finished.stop_sequence},
        "usage": usage(finished.result),
        MTP_EXTENSION: mtp_extension(finished.result.stats),
    }
    return (
        event("content_block_stop", {"type": "content_block_stop", "index": 0})
        + event("message_delta", delta)
        + event("message_stop", {"type": "message_stop"})
    )


def event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"
