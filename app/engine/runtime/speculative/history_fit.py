"""Leaving out a conversation's oldest turns when it no longer fits the model's context.

A long conversation outgrows the context window; the request then either fails ("the prompt is
5,000 tokens but the context window is 4,096") or, when the request allows it
(``GenerationRequest.trim_history``, the chat's "drop the oldest turns when full"), loses its
oldest turns: whole turns (a user message and the replies that followed it), oldest first, until
the prompt leaves room for the reply. The system prompt and the last user message always stay.
What was left out is said in the reply's note, so nothing disappears silently.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from app.engine.runtime.core.request import GenerationRequest

REPLY_SHARE = 4
"""A trimmed prompt leaves the reply its max tokens, but never more than a quarter of the
context (a larger max tokens stops at the context's end, as it would anyway)."""


def fit_history(
    request: GenerationRequest, count_tokens: Callable[[GenerationRequest], int], context: int
) -> tuple[GenerationRequest, int]:
    """``request`` with its oldest turns left out until its prompt (``count_tokens``) leaves
    room for the reply in ``context`` tokens; and how many messages were left out (0: it fit,
    or the request does not allow trimming)."""
    if not request.trim_history or not request.messages:
        return request, 0
    limit = context - min(request.max_tokens, context // REPLY_SHARE)
    system = [message for message in request.messages[:1] if message.role == "system"]
    rest = list(request.messages[len(system) :])
    dropped = 0
    while True:
        fitted = replace(request, messages=(*system, *rest))
        if count_tokens(fitted) <= limit or len(rest) <= 1:
            return fitted, dropped
        cut = 1  # the oldest turn: its user message and the replies up to the next one
        while cut < len(rest) - 1 and rest[cut].role != "user":
            cut += 1
        rest = rest[cut:]
        dropped += cut


def left_out_note(dropped: int, context: int) -> str:
    """The reply's note when ``dropped`` messages were left out."""
    messages = "message was" if dropped == 1 else "messages were"
    return (
        f"The {dropped} oldest {messages} left out: the conversation no longer fits the "
        f"{context:,}-token context."
    )
