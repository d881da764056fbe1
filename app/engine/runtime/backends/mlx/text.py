"""The text side of the MLX backend: token ids ↔ text through the model's Hugging Face tokenizer.

The decoding loop streams raw bytes per token (a character may span tokens), so byte-level BPE
token strings are mapped back to their bytes with GPT-2's byte table; added/control tokens give
no bytes, as in the llama.cpp backend.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import llguidance
from gguf.vocab import bytes_to_unicode
from llguidance.hf import from_tokenizer


@lru_cache(maxsize=1)
def _unicode_to_byte() -> dict[str, int]:
    """The inverse of GPT-2's ``bytes_to_unicode`` table used by byte-level BPE vocabularies."""
    return {char: byte for byte, char in bytes_to_unicode().items()}


class HfText:
    """Tokenize, detokenize and describe special tokens for one Hugging Face tokenizer."""

    def __init__(self, tokenizer: Any, eos_token_ids: set[int]) -> None:
        self._tokenizer = tokenizer
        self._eos = frozenset(eos_token_ids)
        self._control = frozenset(
            token_id
            for token_id, added in tokenizer.added_tokens_decoder.items()
            if getattr(added, "special", True)
        )
        self._byte_level = "ByteLevel" in repr(tokenizer.backend_tokenizer.decoder)
        self._pieces: dict[int, bytes] = {}
        self._texts: dict[int, str] = {}

    def tokenize(self, text: str, *, parse_special: bool) -> list[int]:
        backend = self._tokenizer.backend_tokenizer
        backend.encode_special_tokens = not parse_special
        try:
            return list(backend.encode(text, add_special_tokens=False).ids)
        finally:
            backend.encode_special_tokens = False

    def token_bytes(self, token: int) -> bytes:
        piece = self._pieces.get(token)
        if piece is None:
            piece = self._pieces[token] = self._bytes_of(token)
        return piece

    def token_text(self, token: int) -> str:
        text = self._texts.get(token)
        if text is None:
            piece = self.token_bytes(token)
            text = piece.decode("utf-8", errors="replace") if piece else self._name_of(token)
            self._texts[token] = text
        return text

    def _name_of(self, token: int) -> str:
        name = self._tokenizer.convert_ids_to_tokens(token)
        return name if isinstance(name, str) else ""

    def _bytes_of(self, token: int) -> bytes:
        if token in self._control:
            return b""
        text = self._tokenizer.convert_ids_to_tokens(token)
        if text is None:
            return b""
        table = _unicode_to_byte()
        if self._byte_level and all(char in table for char in text):
            return bytes(table[char] for char in text)
        return self._tokenizer.decode([token]).encode("utf-8")

    def grammar_tokenizer(self, vocab_size: int) -> llguidance.LLTokenizer:
        """The vocabulary as llguidance sees it, padded to the model's ``vocab_size`` rows."""
        return from_tokenizer(self._tokenizer, n_vocab=vocab_size, eos_token=sorted(self._eos))

    def is_end_of_generation(self, token: int) -> bool:
        return token in self._eos

    @property
    def chat_template(self) -> str | None:
        template = getattr(self._tokenizer, "chat_template", None)
        return template if isinstance(template, str) else None

    @property
    def special_token_texts(self) -> dict[str, str]:
        return {
            "bos_token": self._tokenizer.bos_token or "",
            "eos_token": self._tokenizer.eos_token or "",
        }

    @property
    def bos_token_id(self) -> int | None:
        """BOS when the tokenizer's own pipeline adds one, else None."""
        bos = self._tokenizer.bos_token_id
        if bos is None:
            return None
        with_special = self._tokenizer.backend_tokenizer.encode("a", add_special_tokens=True).ids
        return bos if with_special and with_special[0] == bos else None
