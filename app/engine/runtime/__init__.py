"""The chat runtime: exact MTP speculative decoding behind a worker process.

Front ends (CLI, chat window, server) use :class:`RuntimeClient`: ``load()`` a model, ``start()`` a
:class:`GenerationRequest` and iterate the :class:`GenerationStream` for :class:`TokenChunk`\\ s
(token ids, text, :class:`DecodeStats` so far), ``cancel()`` from any thread, read ``result``
(:class:`GenerationResult`), ``close()``. Backends implement :class:`DecodeBackend`; the
speculative cycle, acceptance laws, sampler and statistics are backend-agnostic.

Tool calling and structured output are wire-format-free too, for every API to share: a request
carries :class:`ToolSpec`\\ s, a :class:`ToolChoice` and an :class:`OutputConstraint` (see
:func:`json_schema_constraint`); replies are split into content and :class:`ToolCall`\\ s by
:func:`parse_reply` (whole) or :class:`ToolCallEvents` (streamed: a call's name, then its
arguments piece by piece).

The package is organised in rooms, each importing only the rooms below it (checked by
``tests/test_architecture.py``): ``sampling`` and ``chat_format`` at the bottom, then ``core``
(the backend contract, request and statistics types), ``speculative`` (the generation loop),
``backends`` (llama.cpp, MLX), ``process`` (the worker process and its client) and ``bench``.
See ``docs/architecture.md``.

Names are attached lazily, so importing one room does not import the others (or llama.cpp).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "AcceptMode": "app.engine.runtime.sampling.acceptance",
    "BACKEND_CHOICES": "app.engine.runtime.backends.choice",
    "BackendChoice": "app.engine.runtime.backends.choice",
    "ChatMessage": "app.engine.runtime.chat_format.prompting",
    "choose_backend": "app.engine.runtime.backends.choice",
    "DecodeBackend": "app.engine.runtime.core.backend",
    "DecodeStats": "app.engine.runtime.core.stats",
    "demo_model_path": "app.engine.runtime.core.demo_model",
    "GenerationRequest": "app.engine.runtime.core.request",
    "GenerationResult": "app.engine.runtime.core.request",
    "GenerationStream": "app.engine.runtime.process.client",
    "json_schema_constraint": "app.engine.runtime.chat_format.constraint",
    "LoadSettings": "app.engine.runtime.core.backend",
    "ModelInfo": "app.engine.runtime.core.backend",
    "OutputConstraint": "app.engine.runtime.chat_format.constraint",
    "parse_reply": "app.engine.runtime.chat_format.tool_call_events",
    "RuntimeClient": "app.engine.runtime.process.client",
    "SamplerSettings": "app.engine.runtime.sampling.sampler",
    "TokenChunk": "app.engine.runtime.core.request",
    "ToolCall": "app.engine.runtime.chat_format.tools",
    "ToolCallEvents": "app.engine.runtime.chat_format.tool_call_events",
    "ToolChoice": "app.engine.runtime.chat_format.tools",
    "ToolSpec": "app.engine.runtime.chat_format.tools",
}

__all__ = [
    "BACKEND_CHOICES",
    "AcceptMode",
    "BackendChoice",
    "ChatMessage",
    "DecodeBackend",
    "DecodeStats",
    "GenerationRequest",
    "GenerationResult",
    "GenerationStream",
    "LoadSettings",
    "ModelInfo",
    "OutputConstraint",
    "RuntimeClient",
    "SamplerSettings",
    "TokenChunk",
    "ToolCall",
    "ToolCallEvents",
    "ToolChoice",
    "ToolSpec",
    "choose_backend",
    "demo_model_path",
    "json_schema_constraint",
    "parse_reply",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from app.engine.runtime.backends.choice import BACKEND_CHOICES, BackendChoice, choose_backend
    from app.engine.runtime.chat_format.constraint import OutputConstraint, json_schema_constraint
    from app.engine.runtime.chat_format.prompting import ChatMessage
    from app.engine.runtime.chat_format.tool_call_events import ToolCallEvents, parse_reply
    from app.engine.runtime.chat_format.tools import ToolCall, ToolChoice, ToolSpec
    from app.engine.runtime.core.backend import DecodeBackend, LoadSettings, ModelInfo
    from app.engine.runtime.core.demo_model import demo_model_path
    from app.engine.runtime.core.request import GenerationRequest, GenerationResult, TokenChunk
    from app.engine.runtime.core.stats import DecodeStats
    from app.engine.runtime.process.client import GenerationStream, RuntimeClient
    from app.engine.runtime.sampling.acceptance import AcceptMode
    from app.engine.runtime.sampling.sampler import SamplerSettings
