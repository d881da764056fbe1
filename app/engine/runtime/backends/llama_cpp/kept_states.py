"""Prefix reuse on llama.cpp: the lanes requests run on and the states kept for each.

A *lane* is a target context and sequence a kind of request runs on: the drafting lane (the
target that keeps recurrent-state snapshots, with its drafter) or the plain lane (a target
without snapshots; the drafting one itself when the model cannot draft). Each lane has a live
session (the tokens its state stands for, left by the previous request), checkpoints inside it,
and saved sessions of conversations another prompt displaced; :mod:`..prefix_cache` decides where
a prompt resumes and bounds the memory. This module moves the native state: it restores a saved
session, rewinds the live one (recurrent layers from a checkpoint, KV by position), keeps
checkpoints and saves whole states.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.backends.image_cells import position_at
from app.engine.runtime.backends.llama_cpp.contexts import RECURRENT_ONLY, WHOLE, LlamaContext
from app.engine.runtime.backends.llama_cpp.drafter import Drafter
from app.engine.runtime.backends.prefix_cache import (
    SAVE_MIN_TOKENS,
    KeptState,
    KeptStates,
    ResumeOption,
    ResumePlan,
    Session,
    common_prefix_length,
    plan_resume,
    resume_point,
)

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Lane:
    """Where a kind of request runs: ``trunk``'s sequence ``seq``, with ``drafter`` on the
    drafting lane. ``hidden_last`` is the trunk's hidden state for the last committed position
    (what the drafter pairs with the next token); ``drafter_in_step`` says whether the
    drafter's rows cover the live session's tokens (a plain request on a shared context leaves
    them behind)."""

    name: str
    trunk: LlamaContext
    drafter: Drafter | None
    hidden_last: np.ndarray
    seq: int = 0
    drafter_in_step: bool = False


@dataclass(frozen=True)
class _SavedLane:
    """A lane's whole state, saved: the drafter's (when it was in step) and the trunk's."""

    drafter: Any
    trunk: np.ndarray
    drafter_in_step: bool


class KeptLanes:
    """The kept states of every lane, bounded together by ``budget_bytes``; ``recurrent``: the
    trunk has layers that cannot be rewound (they resume only at a checkpoint)."""

    def __init__(self, budget_bytes: int, *, recurrent: bool, model_name: str) -> None:
        self.states = KeptStates(budget_bytes)
        self.recurrent = recurrent
        self._model_name = model_name

    def live(self, lane: Lane) -> Session:
        return self.states.live_session(lane.name)

    def clear(self) -> None:
        self.states.clear()

    def reusable_prefix(self, lane: Lane, tokens: Sequence[int], with_mtp: bool) -> int:
        return self._plan(lane, tokens, with_mtp).position

    def _plan(self, lane: Lane, tokens: Sequence[int], with_mtp: bool) -> ResumePlan:
        """Where ``tokens`` would resume: in the live session or a saved one of the lane, at
        the length :func:`resume_point` allows (the end of a session keeps its hidden state,
        a checkpoint or a trimmed state does not)."""
        live = self.live(lane)

        def options(session: Session, shared: int) -> tuple[int, list[ResumeOption]]:
            if session is live:
                in_step = lane.drafter_in_step
            else:
                in_step = session.saved.payload.drafter_in_step
            point = resume_point(
                session.tokens,
                tokens,
                rewindable=not self.recurrent,
                checkpoints=session.checkpoints,
                common=shared,
            )
            rows = len(session.tokens) if in_step else -1
            return rows, [ResumeOption(point, hidden_kept=point == len(session.tokens))]

        sessions = [live, *self.states.saved_sessions(lane.name)]
        return plan_resume(tokens, sessions, options, with_mtp=with_mtp, recurrent=self.recurrent)

    def resume(self, lane: Lane, tokens: Sequence[int], with_mtp: bool) -> tuple[int, str, bool]:
        """Bring the lane's context to the longest kept prefix of ``tokens``; return its
        length, where it came from (a :class:`PrefixReuse` source) and whether the state was
        continued as it was kept rather than cut back."""
        live = self.live(lane)
        plan = self._plan(lane, tokens, with_mtp)
        displaced = (
            len(live.tokens) >= SAVE_MIN_TOKENS
            and common_prefix_length(live.tokens, tokens) < len(live.tokens) // 2
        )
        if displaced and (not with_mtp or lane.drafter_in_step):
            self._save_live(lane)
        try:
            if plan.session is not live:
                self._restore_saved(lane, plan.session)
            continuing = plan.position == len(plan.session.tokens)
            return self.rewind(lane, plan.position, with_mtp), plan.source, continuing
        except RuntimeBackendError as exc:  # a kept state llama.cpp would not take back
            log.warning("computing the prompt from the start: %s", exc)
            self.forget(lane)
            return self.rewind(lane, 0, with_mtp), "", False

    def rewind(self, lane: Lane, length: int, with_mtp: bool) -> int:
        """Keep the first ``length`` tokens of the lane's live state (0: clear it)."""
        live = self.live(lane)
        drafter = lane.drafter if with_mtp else None
        if length == 0:
            lane.trunk.clear()
            if drafter is not None:
                drafter.clear()
            self.states.forget_live(lane.name)
            return 0
        if length == len(live.tokens):
            return length
        if self.recurrent:
            checkpoint = live.checkpoints[length]
            lane.trunk.restore_state(lane.seq, checkpoint.payload, RECURRENT_ONLY)
            self.states.touch(checkpoint)
        position = position_at(live.tokens, length)  # images fill more cells than positions
        if not lane.trunk.keep_first(lane.seq, position) or (
            drafter is not None and not drafter.keep_first(position)
        ):
            raise RuntimeBackendError(
                f"llama.cpp refused to trim the kept state of {self._model_name} to {length} tokens"
            )
        live.keep_first(length)
        return length

    def forget(self, lane: Lane) -> None:
        """After a failure the lane's state is unknown: clear it, keep nothing of it live."""
        lane.trunk.clear()
        if lane.drafter is not None:
            lane.drafter.clear()
        self.states.forget_live(lane.name)
        lane.drafter_in_step = False

    def keep_checkpoint(self, lane: Lane, length: int) -> None:
        if lane.trunk.state_size(lane.seq, RECURRENT_ONLY) > self.states.budget_bytes:
            return
        state = lane.trunk.copy_state(lane.seq, RECURRENT_ONLY)
        self.states.add_checkpoint(lane.name, length, KeptState(state.nbytes, state))

    def _save_live(self, lane: Lane) -> None:
        """Keep a copy of the lane's whole live state (trunk, and drafter when it is in step),
        unless it alone would exceed the budget."""
        drafter = lane.drafter if lane.drafter_in_step else None
        size = lane.trunk.state_size(lane.seq, WHOLE)
        if drafter is not None:
            size += drafter.state_bytes()
        if size > self.states.budget_bytes:
            return
        saved = _SavedLane(
            drafter.copy_state() if drafter is not None else None,
            lane.trunk.copy_state(lane.seq, WHOLE),
            drafter_in_step=drafter is not None,
        )
        nbytes = saved.trunk.nbytes + (drafter.state_bytes() if drafter is not None else 0)
        self.states.save_copy_of_live(
            lane.name, KeptState(nbytes, saved), extra=lane.hidden_last.copy()
        )

    def _restore_saved(self, lane: Lane, session: Session) -> None:
        assert session.saved is not None
        saved: _SavedLane = session.saved.payload
        lane.trunk.restore_state(lane.seq, saved.trunk, WHOLE)
        if saved.drafter_in_step:
            assert lane.drafter is not None
            lane.drafter.restore_state(saved.drafter)
            lane.hidden_last = session.extra
        lane.drafter_in_step = saved.drafter_in_step
        self.states.restore(session)

    @property
    def total_bytes(self) -> int:
        return self.states.total_bytes
