"""Constrained decoding: what the output must match, and the grammar state that masks logits.

The grammar engine is llguidance (Earley-based, so any JSON schema or context-free grammar, with
token masks computed in microseconds from a tokenizer built from the model's own vocabulary and
no torch dependency). An :class:`OutputConstraint` is plain data that crosses the process
boundary; the worker turns it into a :class:`GrammarState`, which the decoding loop asks for the
mask of the next position and advances over committed (and drafted) tokens.

Speculative decoding stays exact because the draft and the target are masked by the *same*
state: the mask for position i of a cycle is computed once, after the drafts before i were
consumed, and applied to the head's proposal q_i and to the target's p_i alike; the state is
rolled back over the rejected drafts. Acceptance then runs between the masked distributions, so
the output is distributed exactly as the constrained target's.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import llguidance
import numpy as np

from app.engine.errors import RuntimeBackendError

JSON_OBJECT_SCHEMA: dict[str, Any] = {"type": "object"}


@dataclass(frozen=True)
class OutputConstraint:
    """A llguidance grammar (its serialised form) the whole reply must match; ``what`` names it
    in messages ("the JSON schema 'weather'")."""

    grammar: str
    what: str


def json_schema_constraint(schema: dict[str, Any], what: str) -> OutputConstraint:
    """The reply is one JSON value matching ``schema``; a schema llguidance cannot compile is a
    :class:`RuntimeBackendError` naming ``what``."""
    try:
        grammar = llguidance.LLMatcher.grammar_from_json_schema(
            json.dumps(schema), defaults={"whitespace_flexible": False}
        )
    except ValueError as exc:
        raise RuntimeBackendError(f"{what} is not a usable JSON schema: {exc}") from None
    return checked(OutputConstraint(grammar, what))


def lark_constraint(lark: str, what: str) -> OutputConstraint:
    return checked(OutputConstraint(llguidance.LLMatcher.grammar_from_lark(lark), what))


def checked(constraint: OutputConstraint) -> OutputConstraint:
    """``constraint`` when llguidance accepts its grammar, else a clear error."""
    problem = llguidance.LLMatcher.validate_grammar(constraint.grammar)
    if problem:
        raise RuntimeBackendError(f"{constraint.what} cannot be enforced: {_first_line(problem)}")
    return constraint


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


class GrammarState:
    """One request's position in its grammar: masks logits, consumes tokens, rolls back."""

    def __init__(
        self, constraint: OutputConstraint, tokenizer: llguidance.LLTokenizer, vocab_size: int
    ) -> None:
        self._matcher = llguidance.LLMatcher(tokenizer, constraint.grammar, log_level=0)
        self._what = constraint.what
        self._vocab_size = vocab_size
        self.mask_seconds = 0.0  # time spent computing masks, and how many (for benchmarks)
        self.masks = 0
        self._raise_if_failed()

    def allowed(self) -> np.ndarray:
        """A boolean row over the vocabulary: the tokens the grammar allows next."""
        started = time.perf_counter()
        bits = np.frombuffer(self._matcher.compute_bitmask(), dtype=np.uint8)
        allowed = np.unpackbits(bits, bitorder="little")[: self._vocab_size].astype(bool)
        if allowed.size < self._vocab_size:  # tokens past the grammar tokenizer's vocabulary
            allowed = np.pad(allowed, (0, self._vocab_size - allowed.size))
        self.mask_seconds += time.perf_counter() - started
        self.masks += 1
        self._raise_if_failed()
        return allowed

    def consume(self, token: int) -> None:
        self._matcher.consume_token(token)
        self._raise_if_failed()

    def rollback(self, count: int) -> None:
        if count:
            self._matcher.rollback(count)
            self._raise_if_failed()

    @property
    def finished(self) -> bool:
        """True when only an end-of-generation token may follow."""
        return self._matcher.is_stopped()

    def _raise_if_failed(self) -> None:
        if self._matcher.is_error():
            raise RuntimeBackendError(
                f"{self._what} could not be followed: {_first_line(self._matcher.get_error())}"
            )


def masked(logits: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """A copy of a logits row with every token the grammar forbids at -inf."""
    return np.where(allowed, logits, -np.inf).astype(logits.dtype, copy=False)
