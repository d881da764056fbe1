"""The chat runtime: exact MTP speculative decoding behind a worker process.

Front ends (CLI, chat window) use :class:`RuntimeClient`: ``load()`` a model, ``start()`` a
:class:`GenerationRequest` and iterate the :class:`GenerationStream` for :class:`TokenChunk`\\ s
(token ids, text, :class:`DecodeStats` so far), ``cancel()`` from any thread, read ``result``
(:class:`GenerationResult`), ``close()``. Backends implement :class:`DecodeBackend`; the
speculative cycle, acceptance laws, sampler and statistics are backend-agnostic.
"""

from app.engine.runtime.acceptance import AcceptMode
from app.engine.runtime.backend import DecodeBackend, LoadSettings, ModelInfo
from app.engine.runtime.backends import BACKEND_CHOICES, BackendChoice, choose_backend
from app.engine.runtime.client import GenerationStream, RuntimeClient
from app.engine.runtime.demo_model import demo_model_path
from app.engine.runtime.prompting import ChatMessage
from app.engine.runtime.request import GenerationRequest, GenerationResult, TokenChunk
from app.engine.runtime.sampling import SamplerSettings
from app.engine.runtime.stats import DecodeStats

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
    "RuntimeClient",
    "SamplerSettings",
    "TokenChunk",
    "choose_backend",
    "demo_model_path",
]
