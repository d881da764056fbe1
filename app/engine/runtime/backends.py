"""Which inference backend runs a model: ``auto``, ``llama.cpp`` or ``mlx``.

The choice is checked in the caller's process (fast, clear errors for a wrong path or an
unavailable backend, no worker started) and the backend itself is opened in the worker.
"""

from __future__ import annotations

from pathlib import Path

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.backend import DecodeBackend, LoadSettings
from app.engine.runtime.gguf_info import read_gguf_summary

LLAMA_CPP = "llama.cpp"
MLX = "mlx"
BACKEND_CHOICES = ("auto", LLAMA_CPP, MLX)


def resolve_backend(name: str, model_path: Path) -> str:
    """The concrete backend for ``name`` and ``model_path``, after checking the file suits it."""
    if name not in BACKEND_CHOICES:
        raise RuntimeBackendError(
            f"unknown backend '{name}': choose one of {', '.join(BACKEND_CHOICES)}"
        )
    if name == MLX or (name == "auto" and Path(model_path).is_dir()):
        raise RuntimeBackendError(
            f"the MLX backend is not available yet, so {model_path} cannot run with it; "
            "use --backend llama.cpp with a .gguf model for now"
        )
    read_gguf_summary(Path(model_path))
    return LLAMA_CPP


def open_backend(name: str, model_path: Path, settings: LoadSettings) -> DecodeBackend:
    """Load ``model_path`` with the (already resolved) backend ``name``; runs in the worker."""
    if name != LLAMA_CPP:
        raise RuntimeBackendError(f"backend '{name}' cannot be opened in this build")
    from app.engine.runtime.llama_cpp_backend import LlamaCppBackend

    return LlamaCppBackend(Path(model_path), settings)
