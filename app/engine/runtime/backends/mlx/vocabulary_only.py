"""A model folder's tokenizer and chat template without its weights, for counting prompt tokens
in the server's process (as :mod:`..llama_cpp.vocabulary_only` does for a GGUF)."""

from __future__ import annotations

from pathlib import Path

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.backends.mlx.text import HfText


def open_vocabulary(folder: Path) -> HfText:
    """The folder's Hugging Face tokenizer as the MLX backend reads it."""
    from mlx_lm.utils import load_tokenizer

    try:
        tokenizer = load_tokenizer(folder)
    except (ValueError, OSError) as exc:
        raise RuntimeBackendError(
            f"the tokenizer of {folder.name} cannot be read ({exc}); the folder needs "
            "tokenizer.json or tokenizer.model"
        ) from None
    return HfText(tokenizer._tokenizer, set(tokenizer.eos_token_ids))
