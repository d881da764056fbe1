"""A GGUF's vocabulary and chat template without its weights, for counting prompt tokens.

llama.cpp loads a model with ``vocab_only`` in milliseconds and a few megabytes (it reads the
token list and merges, no tensors), so the server's own process can render and tokenize a prompt
(``count_tokens``, the context check before a request queues) while the worker generates.
"""

from __future__ import annotations

from pathlib import Path

import llama_cpp

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.backends.gguf_info import read_gguf_summary
from app.engine.runtime.backends.llama_cpp import log as llama_cpp_log
from app.engine.runtime.backends.llama_cpp.model import initialise_once
from app.engine.runtime.backends.llama_cpp.vocab import LlamaVocab


class VocabularyOnly:
    """The text side of ``path`` (a :class:`PromptText`); :meth:`close` frees it."""

    def __init__(self, path: Path) -> None:
        initialise_once()
        summary = read_gguf_summary(path)
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        self._pointer = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
        if not self._pointer:
            raise RuntimeBackendError(
                f"llama.cpp could not read the vocabulary of {path} "
                f"({llama_cpp_log.take_recent()}); the file may be truncated"
            )
        vocab = llama_cpp.llama_model_get_vocab(self._pointer)
        self._vocab = LlamaVocab(
            vocab, llama_cpp.llama_vocab_n_tokens(vocab), summary.chat_template
        )

    def tokenize(self, text: str, *, parse_special: bool) -> list[int]:
        return self._vocab.tokenize(text, parse_special=parse_special)

    @property
    def chat_template(self) -> str | None:
        return self._vocab.chat_template

    @property
    def special_token_texts(self) -> dict[str, str]:
        return self._vocab.special_token_texts

    @property
    def bos_token_id(self) -> int | None:
        return self._vocab.bos_token_id

    def close(self) -> None:
        if self._pointer:
            llama_cpp.llama_model_free(self._pointer)
        self._pointer = None
