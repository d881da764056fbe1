"""Several requests at once on one llama.cpp model: one :class:`SequenceBackend` per sequence.

With ``LoadSettings.sequences`` N > 1 the model's drafting target and its MTP head's context
hold N sequences (:mod:`.model`). Each sequence is a whole :class:`DecodeBackend` of its own —
its own :class:`~.decode.Decoder`, kept states (prefix reuse and checkpoints, a share of the
budget), MTP head queue and hidden state — over views of the shared contexts
(:class:`~.step_gate.SequenceContext`), so a request decodes with the same code whether it runs
alone or beside others, and drafts with its own MTP state. The decodes of the sequences that run
a request meet in the :class:`~.step_gate.StepGate`: one merged batch per context and step
(continuous batching). Plain requests run on the drafting target too (one context for all: it
keeps rollback snapshots, which a plain step does not need).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence

import llguidance
import numpy as np

from app.engine.runtime.backends.llama_cpp.batch import NumpyBatch
from app.engine.runtime.backends.llama_cpp.contexts import LlamaContext
from app.engine.runtime.backends.llama_cpp.decode import Decoder
from app.engine.runtime.backends.llama_cpp.kept_states import KeptLanes, Lane
from app.engine.runtime.backends.llama_cpp.mtp_head import MtpHeadDrafter
from app.engine.runtime.backends.llama_cpp.step_gate import SequenceContext, StepGate
from app.engine.runtime.core.backend import (
    DecodeBackend,
    DraftChooser,
    DraftResult,
    ModelInfo,
    PrefixReuse,
    VerifyResult,
)

PREFILL_CHUNK = 256
"""Prompt rows a sequence decodes per step while others run: a step with a whole 512-row chunk
would hold every running stream for its time; 256 keeps them flowing at little cost to the
prompt's own speed (llama-server's default is 512 with one slot, and it too splits)."""


def open_sequences(
    parent: DecodeBackend,
    target: LlamaContext,
    head: LlamaContext | None,
    *,
    count: int,
    kept: KeptLanes,
) -> tuple[SequenceBackend, ...]:
    """``count`` sequences over ``target`` (and ``head``, the MTP head's context, when the
    model drafts), each keeping states like ``kept`` (the single request's) with an equal share
    of its budget."""
    info = parent.info
    gate = StepGate(PREFILL_CHUNK * count, info.embedding_length)
    sequences = []
    for seq in range(count):
        batch = NumpyBatch(PREFILL_CHUNK, info.embedding_length)
        drafter = None
        if head is not None:
            drafter = MtpHeadDrafter(SequenceContext(head, seq, gate, batch), batch, seq=seq)
        trunk = SequenceContext(target, seq, gate, batch)
        lane = Lane("drafting", trunk, drafter, np.zeros(info.embedding_length, np.float32), seq)
        own = KeptLanes(
            kept.states.budget_bytes // count, recurrent=kept.recurrent, model_name=info.path.name
        )
        decoder = Decoder(info, lane, lane, lambda lane=lane: lane, own, batch)
        sequences.append(SequenceBackend(parent, decoder, gate))
    return tuple(sequences)


class SequenceBackend(DecodeBackend):
    """One sequence of a model loaded for several: decoding is its own, the vocabulary and the
    model's description are ``parent``'s. Run each request inside :meth:`running`."""

    def __init__(self, parent: DecodeBackend, decoder: Decoder, gate: StepGate) -> None:
        self._parent = parent
        self._decoder = decoder
        self._gate = gate
        self._last_reuse = PrefixReuse()
        self.info: ModelInfo = parent.info

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """While a request runs, every step waits for this sequence's rows; after it, not."""
        self._gate.join()
        try:
            yield
        finally:
            self._gate.leave()

    # --- text: the parent's ------------------------------------------------------------------

    def tokenize(self, text: str, *, parse_special: bool) -> list[int]:
        return self._parent.tokenize(text, parse_special=parse_special)

    def token_bytes(self, token: int) -> bytes:
        return self._parent.token_bytes(token)

    def token_text(self, token: int) -> str:
        return self._parent.token_text(token)

    def is_end_of_generation(self, token: int) -> bool:
        return self._parent.is_end_of_generation(token)

    def grammar_tokenizer(self) -> llguidance.LLTokenizer:
        return self._parent.grammar_tokenizer()

    @property
    def chat_template(self) -> str | None:
        return self._parent.chat_template

    @property
    def special_token_texts(self) -> dict[str, str]:
        return self._parent.special_token_texts

    @property
    def bos_token_id(self) -> int | None:
        return self._parent.bos_token_id

    @property
    def performance_fingerprint(self) -> str:
        return self._parent.performance_fingerprint + f":seq{self.info.sequences}"

    @property
    def compute_seconds(self) -> float:
        return self._parent.compute_seconds

    @property
    def cycle_clock(self) -> Callable[[], float]:
        """Wall time: a merged step may run on another sequence's thread."""
        return time.perf_counter

    # --- decoding: this sequence's -------------------------------------------------------------

    @property
    def committed_length(self) -> int:
        return self._decoder.n_past

    def reset(self) -> None:
        self._decoder.reset()

    @property
    def last_prefix_reuse(self) -> PrefixReuse:
        return self._last_reuse

    @property
    def kept_state_bytes(self) -> int:
        return self._decoder.kept.total_bytes

    def reusable_prefix(self, tokens: Sequence[int], *, with_mtp: bool) -> int:
        return self._decoder.reusable_prefix(tokens, with_mtp)

    def prefill(
        self, tokens: Sequence[int], *, with_mtp: bool, keep_at: Sequence[int] = ()
    ) -> np.ndarray:
        logits, start, source = self._decoder.prefill(tokens, with_mtp, keep_at)
        self._last_reuse = PrefixReuse(start, len(tokens) - start, source if start else "", 0)
        return logits

    def step(self, token: int) -> np.ndarray:
        return self._decoder.step(token)

    def draft(self, last_token: int, depth: int, choose: DraftChooser) -> DraftResult:
        return self._decoder.draft(last_token, depth, choose)

    def verify(self, tokens: Sequence[int]) -> VerifyResult:
        return self._decoder.verify(tokens)

    def rollback(self, committed_length: int) -> None:
        self._decoder.rollback(committed_length)

    def close(self) -> None:
        """The shared contexts are the parent's to close."""
