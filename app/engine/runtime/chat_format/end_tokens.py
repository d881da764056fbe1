"""Holding back the end of a reply: ``min_tokens`` and ``ignore_eos``.

A request with ``min_tokens`` N may not end before N tokens; one with ``ignore_eos`` may not
end at all by its own choice (only its length limit or the context ends it). Both are a mask
over the vocabulary that forbids the end-of-generation tokens at the positions where the reply
may not end yet — as llama.cpp (``ignore_eos``) and vLLM (``min_tokens``) do, by setting those
logits to -inf.

The mask goes through the loop exactly as a grammar's does (:class:`TokenRule`): it is asked
for at each position of a cycle, after the drafts before it were consumed, and applied to the
MTP head's proposal q and the target's p alike; rejected drafts are rolled back. So speculative
decoding samples exactly from the suppressed target distribution, and greedy output equals
plain decoding's under the same suppression. It wraps the request's grammar when there is one;
where the grammar allows only the end (a finished JSON document), the end stays allowed, since
nothing else may follow.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class TokenRule(Protocol):
    """What masks a request's tokens position by position: a grammar, end-token suppression."""

    def allowed(self) -> np.ndarray:
        """A boolean row over the vocabulary: the tokens allowed next."""
        ...

    def consume(self, token: int) -> None: ...

    def rollback(self, count: int) -> None: ...

    @property
    def finished(self) -> bool:
        """True when only an end-of-generation token may follow."""
        ...


class EndTokensHeld:
    """Forbids the end tokens (``ends``, a boolean row) while fewer than ``until`` tokens were
    generated (``until`` None: always), over ``inner``'s mask when the request has a grammar."""

    def __init__(self, inner: TokenRule | None, ends: np.ndarray, until: int | None) -> None:
        self._inner = inner
        self._not_end = ~ends
        self._everything = np.ones_like(ends)
        self._until = until
        self._generated = 0

    def allowed(self) -> np.ndarray:
        allowed = self._inner.allowed() if self._inner is not None else self._everything
        if self._until is not None and self._generated >= self._until:
            return allowed
        held = allowed & self._not_end
        return held if held.any() else allowed

    def consume(self, token: int) -> None:
        self._generated += 1
        if self._inner is not None:
            self._inner.consume(token)

    def rollback(self, count: int) -> None:
        self._generated -= count
        if self._inner is not None:
            self._inner.rollback(count)

    @property
    def finished(self) -> bool:
        return self._inner is not None and self._inner.finished
