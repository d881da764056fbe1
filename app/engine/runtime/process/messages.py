"""The messages exchanged with the inference worker process over its pipe.

Client → worker: :class:`LoadModel`, :class:`StartGeneration`, :class:`CancelGeneration`,
:class:`Shutdown`. Worker → client: :class:`ModelLoaded`, :class:`ChunkMessage` (tokens + stats),
:class:`GenerationFinished`, :class:`WorkerFailure`. All are frozen, picklable dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.engine.runtime.core.backend import LoadSettings, ModelInfo
from app.engine.runtime.core.request import GenerationRequest, GenerationResult, TokenChunk


@dataclass(frozen=True)
class LoadModel:
    """``sidecar``: the MTP head file for an MLX model folder (None: the folder's own or none)."""

    backend: str
    path: Path
    settings: LoadSettings
    sidecar: Path | None = None


@dataclass(frozen=True)
class StartGeneration:
    request_id: int
    request: GenerationRequest


@dataclass(frozen=True)
class CancelGeneration:
    request_id: int


@dataclass(frozen=True)
class Shutdown:
    pass


@dataclass(frozen=True)
class ModelLoaded:
    info: ModelInfo


@dataclass(frozen=True)
class ChunkMessage:
    request_id: int
    chunk: TokenChunk


@dataclass(frozen=True)
class GenerationFinished:
    request_id: int
    result: GenerationResult


@dataclass(frozen=True)
class WorkerFailure:
    """``user_error`` True: a message for the user (bad input); False: a bug, with traceback."""

    request_id: int | None
    message: str
    user_error: bool
