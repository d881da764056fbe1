"""The JSON objects the server answers with, in OpenAI's shapes, plus the ``mtp`` extension
(:mod:`app.engine.server.core.mtp_field`): in whole replies, and in the last chunk of a stream.

A stream carries ``usage`` once, in OpenAI's extra last chunk, and only when the request
asks for it (``stream_options.include_usage``); clients that add up usage count it once. A
reply with several choices (``n``) counts the prompt once and every choice's tokens.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

from app.engine.runtime.core.request import GenerationResult
from app.engine.server.core.generation_flow import Finished
from app.engine.server.core.mtp_field import MTP_EXTENSION, mtp_extension

TOOL_CALLS_REASON = "tool_calls"
_FINISH_REASONS = {"stop": "stop", "length": "length", "context": "length", "cancelled": "stop"}


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def finish_reason(finished: Finished, *, calls: int = 0, calls_complete: bool = True) -> str:
    """``tool_calls`` when the reply made calls, ``length`` when its last call was cut off (or
    the text reached the limit), else ``stop``."""
    if calls:
        return TOOL_CALLS_REASON if calls_complete else "length"
    if finished.stopped_by_sequence:
        return "stop"
    return _FINISH_REASONS.get(finished.result.finish_reason, "stop")


def usage(result: GenerationResult | Sequence[GenerationResult]) -> dict[str, Any]:
    """The usage of one result, or of a request's choices (the prompt counted once)."""
    results = [result] if isinstance(result, GenerationResult) else list(result)
    completion = sum(one.stats.generated_tokens for one in results)
    prompt = results[0].prompt_token_count
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": results[0].stats.prompt_reused_tokens},
    }


def chat_completion(
    reply_id: str,
    model: str,
    text: str,
    result: GenerationResult,
    reason: str,
    logprobs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "id": reply_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": reason,
                "logprobs": logprobs,
            }
        ],
        "usage": usage(result),
        MTP_EXTENSION: mtp_extension(result.stats),
    }


def chat_chunk(
    reply_id: str,
    model: str,
    delta: dict[str, Any],
    reason: str | None = None,
    result: GenerationResult | None = None,
    *,
    index: int = 0,
    logprobs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    choice = {"index": index, "delta": delta, "finish_reason": reason, "logprobs": logprobs}
    chunk: dict[str, Any] = {
        "id": reply_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
    }
    if result is not None:
        chunk[MTP_EXTENSION] = mtp_extension(result.stats)
    return chunk


def text_completion(
    reply_id: str,
    model: str,
    text: str,
    reason: str | None = None,
    result: GenerationResult | None = None,
    *,
    whole: bool = False,
    index: int = 0,
    logprobs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``whole`` ``text_completion`` or one streamed piece of it (the last one: ``result``
    given, for its MTP statistics)."""
    reply: dict[str, Any] = {
        "id": reply_id,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": index, "text": text, "finish_reason": reason, "logprobs": logprobs}],
    }
    if result is not None:
        if whole:
            reply["usage"] = usage(result)
        reply[MTP_EXTENSION] = mtp_extension(result.stats)
    return reply


def usage_chunk(
    reply_id: str, model: str, result: Sequence[GenerationResult], object_name: str
) -> dict[str, Any]:
    """OpenAI's extra last chunk for ``stream_options.include_usage``: no choices, the usage."""
    return {
        "id": reply_id,
        "object": object_name,
        "created": int(time.time()),
        "model": model,
        "choices": [],
        "usage": usage(result),
        MTP_EXTENSION: mtp_extension(result[-1].stats),
    }
