"""The chat runtime: exact MTP speculative decoding behind a worker process.

Front ends (CLI, chat window) use :class:`RuntimeClient`: ``load()`` a model, ``start()`` a
:class:`GenerationRequest` and iterate the :class:`GenerationStream` for :class:`TokenChunk`\\ s
(token ids, text, :class:`DecodeStats` so far), ``cancel()`` from any thread, read ``result``
(:class:`GenerationResult`), ``close()``. Backends implement :class:`DecodeBackend`; the
speculative cycle, acceptance laws, sampler and statistics are backend-agnostic.

Tool calling and structured output are wire-format-free too, for every API to share: a request
carries :class:`ToolSpec`\\ s, a :class:`ToolChoice` and an :class:`OutputConstraint` (see
:func:`json_schema_constraint`); replies are split into content and :class:`ToolCall`\\ s by
:func:`parse_reply` (whole) or :class:`ToolCallStream` (streamed).
"""

from app.engine.runtime.acceptance import AcceptMode
from app.engine.runtime.backend import DecodeBackend, LoadSettings, ModelInfo
from app.engine.runtime.backends import BACKEND_CHOICES, BackendChoice, choose_backend
from app.engine.runtime.client import GenerationStream, RuntimeClient
from app.engine.runtime.constraint import OutputConstraint, json_schema_constraint
from app.engine.runtime.demo_model import demo_model_path
from app.engine.runtime.prompting import ChatMessage
from app.engine.runtime.request import GenerationRequest, GenerationResult, TokenChunk
from app.engine.runtime.sampling import SamplerSettings
from app.engine.runtime.stats import DecodeStats
from app.engine.runtime.tool_call_parser import ToolCallStream, parse_reply
from app.engine.runtime.tools import ToolCall, ToolChoice, ToolSpec

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
    "ToolCallStream",
    "ToolChoice",
    "ToolSpec",
    "choose_backend",
    "demo_model_path",
    "json_schema_constraint",
    "parse_reply",
]
