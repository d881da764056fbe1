"""Streaming token → text conversion that never shows special tokens or half characters.

Byte-level BPE tokens can split one UTF-8 character across several tokens, so text is produced
from an incremental UTF-8 decoder fed with each token's bytes: a partial character waits for its
next byte instead of appearing as a replacement mark. Control tokens (``<|im_end|>`` and the
like) have no bytes (the backend's :meth:`token_bytes` returns ``b""`` for them), so they can
never leak into the text.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterable


class StreamingDetokenizer:
    def __init__(self, token_bytes: Callable[[int], bytes]) -> None:
        self._token_bytes = token_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def add(self, tokens: Iterable[int]) -> str:
        """The text the new ``tokens`` complete (may be empty while a character is split)."""
        return self._decoder.decode(b"".join(self._token_bytes(token) for token in tokens))

    def flush(self) -> str:
        """Whatever is left at the end (an incomplete character becomes U+FFFD)."""
        return self._decoder.decode(b"", final=True)
