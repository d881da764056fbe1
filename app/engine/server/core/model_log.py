"""Model loads and unloads in the server's log: a line of text, or one JSON object per line.

``serve`` writes them beside the request log (stderr): ``loading X…``, ``loaded X in 2.1 s``,
``could not load X: …``, ``unloaded X (idle for 600 s)``. With ``--log-format json`` each is an
object whose ``event`` is the :class:`PoolEvent`'s kind (``model_loaded`` …) and whose ``text``
is the line of text, which the Server page shows (:func:`model_event_line`).
"""

from __future__ import annotations

import json
from typing import Any

from app.engine.server.core.echo import clean
from app.engine.server.models.pool import (
    EVICTED,
    IDLE,
    LOAD_FAILED_EVENT,
    LOADED_EVENT,
    LOADING_EVENT,
    UNLOADED_EVENT,
    PoolEvent,
)

LOGGED_MESSAGE_CHARACTERS = 300
MODEL_EVENTS = (LOADING_EVENT, LOADED_EVENT, LOAD_FAILED_EVENT, UNLOADED_EVENT)


def model_event_text(event: PoolEvent) -> str:
    model = event.model_id
    if event.kind == LOADING_EVENT:
        return f"loading {model}…"
    if event.kind == LOADED_EVENT:
        info = event.info
        context = f" · context {info.context_length} tokens" if info else ""
        if info is not None and info.sequences > 1:
            context += f" · {info.sequences} requests at once"
        return f"loaded {model} in {event.seconds:.1f} s{context}"
    if event.kind == LOAD_FAILED_EVENT:
        return f"could not load {model}: {_message(event)}"
    if event.reason == IDLE:
        why = f"idle for {event.seconds:.0f} s"
    elif event.reason == EVICTED:
        why = f"to make room for {event.for_model}"
    else:
        why = event.reason
    return f"unloaded {model} ({why})"


def model_event_json(event: PoolEvent) -> str:
    data: dict[str, Any] = {
        "event": event.kind,
        "model": event.model_id,
        "text": model_event_text(event),
    }
    if event.kind == LOADED_EVENT:
        data["seconds"] = round(event.seconds, 3)
        if event.info is not None:
            data["context_length"] = event.info.context_length
            data["backend"] = event.info.backend
    elif event.kind == LOAD_FAILED_EVENT:
        data["error"] = _message(event)
    elif event.kind != LOADING_EVENT:
        data.update(reason=event.reason, idle_seconds=round(event.seconds, 1))
        if event.for_model:
            data["for_model"] = event.for_model
    return json.dumps(data)


def _message(event: PoolEvent) -> str:
    lines = event.message.strip().splitlines() or [""]
    return clean(lines[-1], LOGGED_MESSAGE_CHARACTERS)


def model_event_line(data: dict[str, Any]) -> str | None:
    """The text of a JSON log line's model event (None: not a model event)."""
    if data.get("event") not in MODEL_EVENTS or not isinstance(data.get("text"), str):
        return None
    return clean(data["text"], LOGGED_MESSAGE_CHARACTERS)
