"""The objects of OpenAI's Responses API: the response, its output items and its usage, plus the
``mtp`` extension.

A reply's text is one ``message`` item (an ``output_text`` part); each call is a
``function_call`` item (``fc_…`` id, ``call_…`` call id, name, arguments as JSON text). A reply
its length limit cut off is ``status: incomplete`` with ``incomplete_details.reason``
``max_output_tokens`` (a call it cut off keeps the arguments written so far, its item
``incomplete``); otherwise ``completed``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.chat_format.tools import ToolCall
from app.engine.runtime.core.request import GenerationResult
from app.engine.server.core.generation_flow import Finished
from app.engine.server.core.mtp_field import MTP_EXTENSION, mtp_extension
from app.engine.server.core.reply_logprobs import chat_entry
from app.engine.server.core.reply_stream import WholeReply, was_cut

COMPLETED, INCOMPLETE, IN_PROGRESS = "completed", "incomplete", "in_progress"


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def message_item(
    item_id: str, text: str, status: str, logprobs: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs or []}
    return {
        "type": "message",
        "id": item_id,
        "status": status,
        "role": "assistant",
        "content": [part] if status != IN_PROGRESS else [],
    }


def function_call_item(item_id: str, call: ToolCall, status: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments,
        "status": status,
    }


def usage(result: GenerationResult) -> dict[str, Any]:
    prompt, output = result.prompt_token_count, result.stats.generated_tokens
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": result.stats.prompt_reused_tokens},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + output,
    }


def status_of(finished: Finished, calls_complete: bool) -> str:
    return INCOMPLETE if was_cut(finished) or not calls_complete else COMPLETED


def response_object(
    response_id: str,
    model: str,
    echoed: dict[str, Any],
    output: list[dict[str, Any]],
    *,
    created_at: int,
    finished: Finished | None = None,
    calls_complete: bool = True,
) -> dict[str, Any]:
    """The response: in progress until ``finished`` is given."""
    body: dict[str, Any] = {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": IN_PROGRESS,
        "error": None,
        "incomplete_details": None,
        "model": model,
        "output": output,
        "background": False,
        "service_tier": "default",
        **echoed,
        "usage": None,
    }
    if finished is not None:
        body["status"] = status_of(finished, calls_complete)
        body["completed_at"] = int(time.time())
        if body["status"] == INCOMPLETE:
            body["incomplete_details"] = {"reason": "max_output_tokens"}
        body["usage"] = usage(finished.result)
        body[MTP_EXTENSION] = mtp_extension(finished.result.stats)
    return body


def whole_output(reply: WholeReply) -> list[dict[str, Any]]:
    """The output items of a reply gathered whole: its text (when it has any, or nothing
    else), then its calls (the last one ``incomplete`` when the length limit cut it off)."""
    text = reply.content.strip() if reply.calls else reply.content
    cut = was_cut(reply.finished)
    output = []
    if text or not reply.calls:
        status = INCOMPLETE if cut and not reply.calls else COMPLETED
        logprobs = [] if reply.calls else [chat_entry(entry) for entry in reply.logprobs]
        output.append(message_item(new_id("msg"), text, status, logprobs))
    for number, call in enumerate(reply.calls, start=1):
        last_cut = number == len(reply.calls) and not reply.calls_complete
        output.append(function_call_item(new_id("fc"), call, INCOMPLETE if last_cut else COMPLETED))
    return output


def assistant_turn(output: list[dict[str, Any]]) -> ChatMessage:
    """The output items as the assistant turn a later ``previous_response_id`` continues."""
    texts = [
        part["text"] for item in output if item["type"] == "message" for part in item["content"]
    ]
    calls = tuple(
        ToolCall(item["call_id"], item["name"], item["arguments"])
        for item in output
        if item["type"] == "function_call"
    )
    return ChatMessage("assistant", "".join(texts), tool_calls=calls)
