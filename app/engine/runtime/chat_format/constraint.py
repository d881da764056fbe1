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
from typing import TYPE_CHECKING, Any

import numpy as np

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.chat_format.schema_limits import check_schema_size, on_compiler_stack

if TYPE_CHECKING:
    import llguidance

JSON_OBJECT_SCHEMA: dict[str, Any] = {"type": "object"}
JSON_LAYOUT: dict[str, Any] = {
    "whitespace_flexible": False,
    "item_separator": ", ",
    "key_separator": ": ",
}
"""How constrained JSON is laid out: one line, spaced as Python's ``json.dumps`` writes it (and
as tool calls appear in training data). Free whitespace would let a small model pad its reply
with newlines until ``max_tokens``."""


@dataclass(frozen=True)
class OutputConstraint:
    """A llguidance grammar (its serialised form) the whole reply must match; ``what`` names it
    in messages ("the JSON schema 'weather'")."""

    grammar: str
    what: str


def json_schema_constraint(schema: dict[str, Any], what: str) -> OutputConstraint:
    """The reply is one JSON value matching ``schema`` (with :func:`closed_objects`); a schema
    past the size limits (:mod:`.schema_limits`) or one llguidance cannot compile is a
    :class:`RuntimeBackendError` naming ``what``."""
    check_schema_size([schema], what)
    text = json.dumps(closed_objects(schema))
    try:
        grammar = on_compiler_stack(
            lambda: _matcher_type().grammar_from_json_schema(text, defaults=JSON_LAYOUT)
        )
    except ValueError as exc:
        raise RuntimeBackendError(f"{what} is not a usable JSON schema: {exc}") from None
    return checked(OutputConstraint(grammar, what))


_OPENS_OBJECT = (
    "additionalProperties",
    "patternProperties",
    "unevaluatedProperties",
    "allOf",
    "anyOf",
    "oneOf",
)


def closed_objects(schema: Any) -> Any:
    """``schema`` with ``"additionalProperties": false`` on every object that lists its
    ``properties`` and says nothing about others (as llama.cpp's schema grammars and OpenAI's
    strict mode treat them): otherwise a model may append made-up keys until ``max_tokens``.
    Objects combined with others (``allOf`` and the like) are left open, as closing one would
    reject the others' keys."""
    if isinstance(schema, list):
        return [closed_objects(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    closed = {
        key: value
        if key in ("allOf", "properties", "const", "enum", "default", "examples")
        else closed_objects(value)
        for key, value in schema.items()
    }
    if isinstance(schema.get("properties"), dict):
        closed["properties"] = {
            name: closed_objects(value) for name, value in schema["properties"].items()
        }
        if not any(key in schema for key in _OPENS_OBJECT):
            closed["additionalProperties"] = False
    return closed


def lark_constraint(lark: str, what: str) -> OutputConstraint:
    grammar = on_compiler_stack(lambda: _matcher_type().grammar_from_lark(lark))
    return checked(OutputConstraint(grammar, what))


def checked(constraint: OutputConstraint) -> OutputConstraint:
    """``constraint`` when llguidance accepts its grammar, else a clear error."""
    problem = on_compiler_stack(lambda: _matcher_type().validate_grammar(constraint.grammar))
    if problem:
        raise RuntimeBackendError(f"{constraint.what} cannot be enforced: {_first_line(problem)}")
    return constraint


def _matcher_type() -> type[llguidance.LLMatcher]:
    """llguidance's matcher, imported on first use: the runtime package is imported when the app
    starts, and most sessions never constrain a reply (the import costs about 50 ms)."""
    from llguidance import LLMatcher

    return LLMatcher


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


class GrammarState:
    """One request's position in its grammar: masks logits, consumes tokens, rolls back."""

    def __init__(
        self, constraint: OutputConstraint, tokenizer: llguidance.LLTokenizer, vocab_size: int
    ) -> None:
        self._matcher = on_compiler_stack(
            lambda: _matcher_type()(tokenizer, constraint.grammar, log_level=0)
        )
        self._what = constraint.what
        self._vocab_size = vocab_size
        self.mask_seconds = 0.0  # time spent computing masks, and how many (for benchmarks)
        self.masks = 0
        self._raise_if_failed()

    def allowed(self) -> np.ndarray:
        """A boolean row over the vocabulary: the tokens the grammar allows next."""
        started = time.perf_counter()
        bits = np.frombuffer(self._matcher.compute_bitmask(), dtype=np.uint8)
        count = min(bits.size * 8, self._vocab_size)
        allowed = np.unpackbits(bits, count=count, bitorder="little").view(bool)
        if count < self._vocab_size:  # tokens past the grammar tokenizer's vocabulary
            allowed = np.pad(allowed, (0, self._vocab_size - count))
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
