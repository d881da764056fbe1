"""Which inference backend runs a model: ``auto``, ``llama.cpp`` or ``mlx``, and why.

``auto`` picks llama.cpp for a GGUF file and MLX for a Hugging Face / MLX model folder
(config.json + safetensors). The choice is checked in the caller's process (fast, clear errors
for a wrong path, a missing config.json or an mlx that cannot be imported, no worker started)
and the backend itself is opened in the worker.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.backends.gguf_info import read_gguf_summary
from app.engine.runtime.core.backend import DecodeBackend, LoadSettings

AUTO = "auto"
LLAMA_CPP = "llama.cpp"
MLX = "mlx"
BACKEND_CHOICES = (AUTO, LLAMA_CPP, MLX)
GGUF_REASON = "a GGUF file runs on llama.cpp"


@dataclass(frozen=True)
class BackendChoice:
    """The concrete backend for a model and a sentence saying why it was chosen."""

    name: str
    reason: str


@lru_cache(maxsize=1)
def mlx_device() -> str:
    """Where mlx computes (``Metal GPU`` or ``CPU``); an error saying what to install if absent."""
    try:
        import mlx.core as mx
        import mlx_lm  # noqa: F401
    except ImportError as exc:
        package = "mlx" if platform.system() == "Darwin" else "'mlx[cpu]'"
        raise RuntimeBackendError(
            f"model folders run on the MLX backend, but mlx cannot be imported here ({exc}); "
            f"install it with: pip install {package} mlx-lm — or pick a .gguf model, which runs "
            "on llama.cpp"
        ) from None
    if mx.default_device() != mx.gpu:
        return "CPU"
    return "Metal GPU" if platform.system() == "Darwin" else "GPU"


def choose_backend(name: str, model_path: Path) -> BackendChoice:
    """The backend for ``name`` (``auto`` or a backend) and ``model_path``, after checking it."""
    if name not in BACKEND_CHOICES:
        raise RuntimeBackendError(
            f"unknown backend '{name}': choose one of {', '.join(BACKEND_CHOICES)}"
        )
    path = Path(model_path)
    if not path.exists():
        raise RuntimeBackendError(f"model file not found: {path}")
    is_folder = path.is_dir()
    if name == MLX or (name == AUTO and is_folder):
        if not is_folder:
            raise RuntimeBackendError(
                f"the MLX backend runs model folders (config.json + safetensors), not the file "
                f"{path}; use --backend llama.cpp (or auto) for a .gguf file"
            )
        from app.engine.runtime.backends.mlx.sidecar import model_type_of

        model_type_of(path)
        refuse_fp8(path)
        device = mlx_device()
        why = "chosen with --backend mlx" if name == MLX else "a model folder runs on mlx-lm"
        return BackendChoice(MLX, f"{why} (mlx on {device})")
    if is_folder:
        raise RuntimeBackendError(
            f"llama.cpp runs .gguf files, and {path} is a folder; use --backend mlx (or auto) "
            "for a Hugging Face / MLX model folder"
        )
    read_gguf_summary(path)
    why = (
        "chosen with --backend llama.cpp" if name == LLAMA_CPP else "a GGUF file runs on llama.cpp"
    )
    return BackendChoice(LLAMA_CPP, why)


def refuse_fp8(folder: Path) -> None:
    """An FP8 checkpoint is refused in one line (mlx-lm would list every scale tensor it does
    not know), with the way forward on the next: convert it, or find a converted repo."""
    from app.engine.convert.fp8_check import fp8_checkpoint

    found = fp8_checkpoint(folder)
    if found is not None:
        raise RuntimeBackendError(found.refusal())


def resolve_backend(name: str, model_path: Path) -> str:
    """The concrete backend name for ``name`` and ``model_path`` (see :func:`choose_backend`)."""
    return choose_backend(name, model_path).name


class Vocabulary(Protocol):
    """A model's text side without its weights: what a prompt count needs."""

    def tokenize(self, text: str, *, parse_special: bool) -> list[int]: ...

    @property
    def chat_template(self) -> str | None: ...

    @property
    def special_token_texts(self) -> dict[str, str]: ...

    @property
    def bos_token_id(self) -> int | None: ...


def open_vocabulary(name: str, model_path: Path) -> Vocabulary:
    """The tokenizer and chat template of ``model_path`` without its weights, for the (already
    chosen) backend ``name``: cheap enough to hold in a front end's own process."""
    if name == MLX:
        from app.engine.runtime.backends.mlx.vocabulary_only import open_vocabulary as open_mlx

        return open_mlx(Path(model_path))
    from app.engine.runtime.backends.llama_cpp.vocabulary_only import VocabularyOnly

    return VocabularyOnly(Path(model_path))


def open_backend(
    name: str, model_path: Path, settings: LoadSettings, sidecar: Path | None = None
) -> DecodeBackend:
    """Load ``model_path`` with the (already chosen) backend ``name``; runs in the worker.

    ``sidecar``: the MTP head file for an MLX model (ignored by llama.cpp, whose GGUF carries
    its head).
    """
    if name == MLX:
        from app.engine.runtime.backends.mlx.backend import MlxBackend

        return MlxBackend(Path(model_path), settings, sidecar)
    if name != LLAMA_CPP:
        raise RuntimeBackendError(f"backend '{name}' cannot be opened in this build")
    from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend

    return LlamaCppBackend(Path(model_path), settings)
