"""A reply's token log-probabilities, kept in step with the text the client is sent.

The runtime reports one entry per generated token (:mod:`app.engine.runtime.sampling.logprobs`);
the server sends text later than it is generated (a stop string may still be matching) and
drops what follows a stop string. A token's entry goes out once the text sent so far holds the
token's bytes, and the entries of tokens after a stop string are never sent, so the entries a
client receives are those of the text it receives. :func:`chat_entry` and
:func:`completion_logprobs` write them in OpenAI's two shapes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.engine.runtime.sampling.logprobs import TokenLogprob, TopLogprob


@dataclass(frozen=True)
class TokenLogprobs:
    """Entries of tokens whose text has now been sent (a reply event)."""

    entries: tuple[TokenLogprob, ...]


class LogprobAligner:
    """Holds entries until the text sent covers their tokens' bytes."""

    def __init__(self) -> None:
        self._pending: deque[TokenLogprob] = deque()
        self._sent_bytes = 0
        self._covered_bytes = 0

    def add(self, entries: Sequence[TokenLogprob]) -> None:
        self._pending.extend(entries)

    def covered(self, text: str) -> tuple[TokenLogprob, ...]:
        """The entries whose tokens ``text`` (the next text sent) completes."""
        self._sent_bytes += len(text.encode("utf-8"))
        out: list[TokenLogprob] = []
        while self._pending:
            size = len(self._pending[0].piece)
            if self._covered_bytes + size > self._sent_bytes:
                break
            self._covered_bytes += size
            out.append(self._pending.popleft())
        return tuple(out)

    def rest(self) -> tuple[TokenLogprob, ...]:
        """Every entry still held (the reply ended without a stop string)."""
        rest = tuple(self._pending)
        self._pending.clear()
        return rest


def _alternative(top: TopLogprob | TokenLogprob) -> dict[str, Any]:
    """A token as OpenAI shows it: a special token by its own name, and that name's bytes (as
    vLLM does), since it stands for no bytes of the text."""
    shown = top.piece or top.text.encode("utf-8")
    return {"token": top.text, "logprob": top.logprob, "bytes": list(shown)}


def chat_entry(entry: TokenLogprob) -> dict[str, Any]:
    """One token in chat completions' ``logprobs.content`` (and the Responses API's)."""
    return {**_alternative(entry), "top_logprobs": [_alternative(top) for top in entry.top]}


def chat_logprobs(entries: Sequence[TokenLogprob]) -> dict[str, Any]:
    """A chat choice's ``logprobs`` object."""
    return {"content": [chat_entry(entry) for entry in entries], "refusal": None}


def completion_logprobs(entries: Sequence[TokenLogprob], offset: int) -> dict[str, Any]:
    """The legacy completions shape: parallel lists, ``text_offset`` counted from ``offset``
    (the characters of the text before these tokens: an echoed prompt, earlier chunks)."""
    offsets = []
    for entry in entries:
        offsets.append(offset)
        offset += len(entry.piece.decode("utf-8", errors="replace"))
    return {
        "tokens": [entry.text for entry in entries],
        "token_logprobs": [entry.logprob for entry in entries],
        "top_logprobs": [{top.text: top.logprob for top in entry.top} for entry in entries],
        "text_offset": offsets,
    }
