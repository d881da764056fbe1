"""One speculative cycle: draft → verify → accept → repair/bonus → commit.

The cycle is described in docs/architecture.md#the-speculative-cycle.

Backend-agnostic: it drives any :class:`DecodeBackend` and applies the chosen acceptance law to
distributions from the one sampler definition. At temperature 0 every distribution is one-hot,
so both laws reduce to "keep drafts while they equal the target's arg-max, then take the target's
arg-max" — computed directly from the logits, which makes greedy MTP output identical to greedy
plain decoding by construction.

Penalties and logit bias (:mod:`app.engine.runtime.sampling.penalties`) shape q and p alike:
each draft is pushed into the request's penalty counts as it is chosen, so position i's edits
count the drafts before it; they are computed once and serve both the head's q_i and the
target's p_i, and the drafts are popped again before the committed tokens are pushed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.engine.runtime.chat_format.constraint import GrammarState, masked
from app.engine.runtime.core.backend import STOP_DRAFTING, DecodeBackend
from app.engine.runtime.core.stats import StatsRecorder
from app.engine.runtime.sampling.acceptance import (
    AcceptMode,
    CycleOutcome,
    accept_by_matching,
    accept_leviathan_chen,
)
from app.engine.runtime.sampling.distribution import SparseDistribution, draw
from app.engine.runtime.sampling.draft_confidence import ConfidenceStop, head_confidence
from app.engine.runtime.sampling.logit_edits import LogitEdits
from app.engine.runtime.sampling.penalties import Penalties
from app.engine.runtime.sampling.sampler import (
    SamplerSettings,
    greedy_token,
    sample,
    sparse_distribution,
)


@dataclass(frozen=True)
class CycleTokens:
    """The tokens a cycle commits: the accepted drafts followed by the repair/bonus token."""

    tokens: tuple[int, ...]
    drafted: int
    accepted: int


class _TargetRows(Sequence[SparseDistribution]):
    """Target distributions p_i computed only for the rows the acceptance law looks at."""

    def __init__(
        self, logits: np.ndarray, sampler: SamplerSettings, edits: Sequence[LogitEdits | None]
    ) -> None:
        self._logits = logits
        self._sampler = sampler
        self._edits = edits
        self._rows: dict[int, SparseDistribution] = {}

    def __len__(self) -> int:
        return len(self._logits)

    def __getitem__(self, index: int) -> SparseDistribution:  # type: ignore[override]
        if index not in self._rows:
            row = self._logits[index]
            self._rows[index] = sparse_distribution(row, self._sampler, self._edits[index])
        return self._rows[index]


class SpeculativeDecoder:
    """Runs cycles against one backend with one sampler, acceptance law and seeded RNG."""

    def __init__(
        self,
        backend: DecodeBackend,
        sampler: SamplerSettings,
        accept: AcceptMode,
        rng: np.random.Generator,
        recorder: StatsRecorder,
        grammar: GrammarState | None = None,
        penalties: Penalties | None = None,
    ) -> None:
        self._backend = backend
        self._grammar = grammar
        self._penalties = penalties or Penalties(sampler, (), backend.info.vocab_size)
        self._sampler = sampler
        self._accept = accept
        self._rng = rng
        self._recorder = recorder

    def cycle(self, last_token: int, depth: int, stop: ConfidenceStop | None = None) -> CycleTokens:
        """Draft up to ``depth`` tokens after ``last_token``, verify them, commit what is
        accepted. With ``stop`` the draft ends early at a token the head is unsure of.

        A depth-0 cycle is one plain step: the head's cache is caught up when drafting resumes.
        """
        if depth == 0:
            return self._plain_cycle(last_token)
        proposals: list[SparseDistribution] = []
        allowed_rows: list[np.ndarray] = []  # the grammar's mask at each position of the cycle
        edit_rows: list[LogitEdits | None] = []  # the penalties' edits at each position
        grammar = self._grammar
        penalties = self._penalties
        recorder = self._recorder
        steps = 0
        greedy = self._sampler.greedy
        if stop is not None:
            stop.start_cycle(greedy=greedy)

        def choose(_index: int, logits: np.ndarray) -> int:
            nonlocal steps
            steps += 1
            if grammar is not None:
                if grammar.finished:  # only the end of the reply may follow
                    return STOP_DRAFTING
                allowed_rows.append(grammar.allowed())
                logits = masked(logits, allowed_rows[-1])
            edit_rows.append(penalties.edits())
            if greedy:
                token = greedy_token(logits, edit_rows[-1])
                confidence = head_confidence(logits, token) if stop is not None else 1.0
            else:
                q = sparse_distribution(logits, self._sampler, edit_rows[-1])
                token = draw(q, self._rng)
                confidence = float(q.at(np.array([token]))[0])
            if stop is not None and not stop.keeps_drafting(confidence, recorder.cost_ratio()):
                return STOP_DRAFTING
            if not self._sampler.greedy:
                proposals.append(q)
            if grammar is not None:
                grammar.consume(token)
            penalties.push(token)
            return token

        started = time.perf_counter()
        drafts = self._backend.draft(last_token, depth, choose).tokens
        verify_started = time.perf_counter()
        verified = self._backend.verify((last_token, *drafts))
        verify_finished = time.perf_counter()

        logits = verified.logits
        if grammar is not None:
            if len(allowed_rows) == len(drafts):  # the row after the last draft
                allowed_rows.append(grammar.allowed())
            logits = np.where(np.stack(allowed_rows), logits, -np.inf).astype(logits.dtype)
        if len(edit_rows) == len(drafts):  # the row after the last draft
            edit_rows.append(penalties.edits())
        outcome = self._decide(drafts, proposals, logits, edit_rows)
        if grammar is not None:
            grammar.rollback(len(drafts) - outcome.accepted)
            grammar.consume(outcome.next_token)
        penalties.pop(len(drafts) - outcome.accepted)
        penalties.push(outcome.next_token)
        self._backend.rollback(self._backend.committed_length - len(drafts) + outcome.accepted)
        if stop is not None:
            stop.learn(outcome.accepted)

        recorder.draft_seconds += verify_started - started
        recorder.draft_steps += steps
        recorder.verify_seconds += verify_finished - verify_started
        recorder.verify_calls += 1
        recorder.confidence_stops += len(drafts) < depth
        recorder.record_cycle(len(drafts), outcome.accepted)
        return CycleTokens(
            tokens=(*drafts[: outcome.accepted], outcome.next_token),
            drafted=len(drafts),
            accepted=outcome.accepted,
        )

    def _plain_cycle(self, last_token: int) -> CycleTokens:
        started = time.perf_counter()
        logits = self._backend.step(last_token)
        self._recorder.verify_seconds += time.perf_counter() - started
        self._recorder.verify_calls += 1
        self._recorder.record_cycle(0, 0)
        if self._grammar is not None:
            logits = masked(logits, self._grammar.allowed())
        token = sample(logits, self._sampler, self._rng, self._penalties.edits())
        if self._grammar is not None:
            self._grammar.consume(token)
        self._penalties.push(token)
        return CycleTokens((token,), drafted=0, accepted=0)

    def _decide(
        self,
        drafts: Sequence[int],
        proposals: Sequence[SparseDistribution],
        logits: np.ndarray,
        edits: Sequence[LogitEdits | None],
    ) -> CycleOutcome:
        if self._sampler.greedy:
            for depth, draft in enumerate(drafts):
                target = greedy_token(logits[depth], edits[depth])
                if target != draft:
                    return CycleOutcome(depth, target)
            return CycleOutcome(len(drafts), greedy_token(logits[len(drafts)], edits[len(drafts)]))
        targets = _TargetRows(logits, self._sampler, edits)
        if self._accept is AcceptMode.LEVIATHAN_CHEN:
            return accept_leviathan_chen(drafts, proposals, targets, self._rng)
        return accept_by_matching(drafts, targets, self._rng)
