"""The model's vocabulary as the decoding loop and the chat template need it.

Token ids from text, the bytes a token stands for (cached: the detokenizer asks for every
generated token), end-of-generation tokens, BOS, the ``bos_token`` / ``eos_token`` texts and the
chat template the GGUF ships, and the vocabulary as llguidance sees it for constrained decoding.
"""

from __future__ import annotations

import ctypes
import warnings

import llama_cpp
import llguidance
from llguidance.llamacpp import lltokenizer_from_vocab


class LlamaVocab:
    """``vocab`` (a ``llama_vocab`` pointer) of ``size`` tokens and the GGUF's chat template."""

    def __init__(self, vocab: llama_cpp.llama_vocab_p, size: int, chat_template: str | None):
        self._vocab = vocab
        self.size = size
        self.chat_template = chat_template
        self._piece_cache: dict[int, bytes] = {}
        self._text_cache: dict[int, str] = {}
        self._end_cache: dict[int, bool] = {}
        self._grammar_tokenizer: llguidance.LLTokenizer | None = None

    def tokenize(self, text: str, *, parse_special: bool) -> list[int]:
        data = text.encode("utf-8")
        capacity = len(data) + 8
        buffer = (llama_cpp.llama_token * capacity)()
        count = llama_cpp.llama_tokenize(
            self._vocab, data, len(data), buffer, capacity, False, parse_special
        )
        if count < 0:
            capacity = -count
            buffer = (llama_cpp.llama_token * capacity)()
            count = llama_cpp.llama_tokenize(
                self._vocab, data, len(data), buffer, capacity, False, parse_special
            )
        return list(buffer[:count])

    def token_bytes(self, token: int) -> bytes:
        piece = self._piece_cache.get(token)
        if piece is None:
            piece = self._piece(token, special=False)
            self._piece_cache[token] = piece
        return piece

    def token_text(self, token: int) -> str:
        text = self._text_cache.get(token)
        if text is None:
            piece = self.token_bytes(token) or self._piece(token, special=True)
            text = self._text_cache[token] = piece.decode("utf-8", errors="replace")
        return text

    def _piece(self, token: int, *, special: bool) -> bytes:
        buffer = ctypes.create_string_buffer(64)
        length = llama_cpp.llama_token_to_piece(self._vocab, token, buffer, 64, 0, special)
        if length < 0:
            buffer = ctypes.create_string_buffer(-length)
            length = llama_cpp.llama_token_to_piece(self._vocab, token, buffer, -length, 0, special)
        return buffer.raw[:length]

    def is_end_of_generation(self, token: int) -> bool:
        end = self._end_cache.get(token)
        if end is None:
            end = self._end_cache[token] = bool(llama_cpp.llama_vocab_is_eog(self._vocab, token))
        return end

    def grammar_tokenizer(self) -> llguidance.LLTokenizer:
        if self._grammar_tokenizer is None:
            ends = [token for token in range(self.size) if self.is_end_of_generation(token)]
            with warnings.catch_warnings():  # it reads token attributes with a deprecated call
                warnings.simplefilter("ignore", DeprecationWarning)
                self._grammar_tokenizer = lltokenizer_from_vocab(
                    self._vocab, eos_token=ends or None, n_vocab=self.size
                )
        return self._grammar_tokenizer

    @property
    def special_token_texts(self) -> dict[str, str]:
        texts = {}
        for name, token in (
            ("bos_token", llama_cpp.llama_vocab_bos(self._vocab)),
            ("eos_token", llama_cpp.llama_vocab_eos(self._vocab)),
        ):
            texts[name] = (
                self._piece(token, special=True).decode("utf-8", "replace") if token >= 0 else ""
            )
        return texts

    @property
    def bos_token_id(self) -> int | None:
        bos = llama_cpp.llama_vocab_bos(self._vocab)
        return bos if bos >= 0 and llama_cpp.llama_vocab_get_add_bos(self._vocab) else None
