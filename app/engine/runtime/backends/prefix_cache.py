"""Which kept state a new prompt resumes from, and the memory those kept states may hold.

Every turn of a chat re-sends the whole conversation; prefilling it again from position 0 costs
seconds on a real model. A backend instead keeps, per model context, the *live* session (the
tokens its state stands for, left by the previous request), a few *checkpoints* inside it, and
whole *saved* sessions of conversations another prompt displaced. This module holds the
backend-independent half: the longest-common-prefix rule, where a session may resume, where to
take checkpoints, and one least-recently-used store bounded in bytes that evicts across all of
them. The backends hold the native state (llama.cpp sequence state, MLX cache arrays).

Resuming at ``s`` means the trunk keeps the state after ``s`` tokens and the prompt's tokens
from ``s`` on are computed. At least one prompt token is always computed (its logits start the
reply), and a trunk with recurrent layers (gated-delta-net) cannot be rewound, so it resumes
only at its live length or at a checkpoint; attention-only trunks trim their KV anywhere.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.engine.runtime.backends.image_cells import outside_image

CHECKPOINT_INTERVAL = 1024
"""Tokens between checkpoints inside a long prompt of a recurrent model: an edit deep in a long
conversation recomputes at most this many tokens before the edit."""

CHECKPOINT_MIN_GAP = 64
"""Fewer tokens than this after the previous checkpoint (or where the computation started,
itself a checkpoint) and a mark is skipped: each checkpoint ends a prefill batch, and on
memory-bound hardware every batch reads all the weights once more — about one token's decode —
while resuming a few tokens earlier costs about as little."""

SAVE_MIN_TOKENS = 64
"""A live session shorter than this is recomputed, not saved, when another prompt displaces it."""


def common_prefix_length(first: Sequence[int], second: Sequence[int]) -> int:
    """How many leading tokens the two sequences share."""
    length = min(len(first), len(second))
    for index in range(length):
        if first[index] != second[index]:
            return index
    return length


def resume_point(
    cached: Sequence[int],
    prompt: Sequence[int],
    *,
    rewindable: bool,
    checkpoints: Iterable[int],
    common: int | None = None,
) -> int:
    """Tokens of ``cached`` to keep for ``prompt`` (0: compute everything).

    The live length itself when ``prompt`` extends it; otherwise the longest kept prefix that
    still leaves a token of ``prompt`` to compute *and* matches one more token than it keeps
    (the MTP head's row for the first kept-after position pairs that token with the trunk's
    state before it, so the head keeps one row more than the trunk): anywhere for a trunk that
    trims (``rewindable``; never inside an image), the latest checkpoint at or before that
    point otherwise (checkpoints are taken between images, never inside one).
    """
    if common is None:
        common = common_prefix_length(cached, prompt)
    if common == len(cached) and len(prompt) > len(cached):
        return len(cached)
    limit = min(common, len(prompt)) - 1
    if limit <= 0:
        return 0
    if rewindable:
        return outside_image(prompt, limit)  # an image is kept or dropped whole
    return max((point for point in checkpoints if point <= limit), default=0)


@dataclass(frozen=True)
class ResumeOption:
    """A length a kept session can resume at: ``position`` tokens kept, with the backend's
    ``state`` for it (a checkpoint). ``hidden_kept``: the trunk's hidden state h_{position−1}
    is kept with it, so a drafter needs its rows through ``position − 1`` only; without it the
    drafter's row at ``position`` (x_position paired with h_{position−1}) must be held."""

    position: int
    hidden_kept: bool
    state: Any = None


@dataclass(frozen=True)
class ResumePlan:
    """Where a prefill starts: ``position`` tokens of ``session`` kept (0: none) through
    ``option``; ``shared`` is how many leading tokens that session and the prompt have in
    common; ``source`` is a :class:`~app.engine.runtime.core.backend.PrefixReuse` source."""

    session: Any
    position: int
    option: ResumeOption | None
    source: str
    shared: int


ResumeOptions = Callable[[Any, int], tuple[int, Iterable[ResumeOption]]]
"""For a kept session and the tokens it shares with the prompt: how many drafter rows it holds
that still match the prompt (−1: its drafter is not in step), and where it can resume."""


def plan_resume(
    prompt: Sequence[int],
    sessions: Sequence[Any],
    options: ResumeOptions,
    *,
    with_mtp: bool,
    recurrent: bool,
) -> ResumePlan:
    """The option that leaves the fewest prompt tokens to compute, over ``sessions`` (each with
    ``tokens``; the live one first, which wins a tie, then the rest in the backend's order);
    with ``with_mtp`` only where the session's drafter rows cover it.

    The backend lists only options that keep tokens the prompt repeats and leave at least one
    prompt token to compute (its logits start the reply): :func:`resume_point` gives such a
    length for a session whose states hold no hidden state except at its end.
    """
    live = sessions[0]
    best = ResumePlan(live, 0, None, "", common_prefix_length(live.tokens, prompt))
    for session in sessions:
        shared = best.shared if session is live else common_prefix_length(session.tokens, prompt)
        drafter_rows, choices = options(session, shared)
        for option in choices:
            position = option.position
            needed = position - 1 if option.hidden_kept else position
            if position <= best.position or (with_mtp and drafter_rows < needed):
                continue
            if session is not live:
                source = "saved"
            elif position == len(session.tokens):
                source = "live"
            else:
                source = "checkpoint" if recurrent else "trimmed"
            best = ResumePlan(session, position, option, source, shared)
    return best


def checkpoint_marks(
    start: int,
    end: int,
    *,
    wanted: Iterable[int] = (),
    interval: int = CHECKPOINT_INTERVAL,
    min_gap: int = CHECKPOINT_MIN_GAP,
) -> list[int]:
    """Lengths inside (start, end) at which a prefill of a recurrent trunk (computing from
    ``start``) keeps a checkpoint: every ``interval`` tokens, at the ``wanted`` lengths (where
    the last user message starts), and one token before the end, so Regenerate (the same prompt
    again) computes one token — each at least ``min_gap`` after the one before it."""
    candidates = set(range((start // interval + 1) * interval, end, interval))
    candidates.update(mark for mark in wanted if start < mark < end)
    if end - 1 > start:
        candidates.add(end - 1)
    marks: list[int] = []
    for mark in sorted(candidates):
        if mark - (marks[-1] if marks else start) >= min_gap:
            marks.append(mark)
    return marks


def chunk_ends(start: int, end: int, marks: Iterable[int], batch: int) -> list[int]:
    """Ends of the prefill batches from ``start`` to ``end``: at most ``batch`` tokens each,
    and a batch ends at every mark (a checkpoint is taken between batches)."""
    ends: list[int] = []
    position = start
    for stop in [*sorted(mark for mark in marks if start < mark < end), end]:
        while position < stop:
            position = min(position + batch, stop)
            ends.append(position)
    return ends


@dataclass
class KeptState:
    """A native state kept in memory: a checkpoint of a live session or a saved session."""

    nbytes: int
    payload: Any
    last_used: int = 0


@dataclass
class Session:
    """Tokens a model context's state stands for, with the checkpoints kept along them.

    ``lane`` names the context (a backend may keep several, e.g. one for drafting requests and
    one for plain ones). The live session's state is in that context; a saved one's is
    ``saved`` (a whole state). ``checkpoints`` map a length to the state of the layers that
    cannot be rewound, kept at that length.
    """

    lane: str
    tokens: list[int] = field(default_factory=list)
    checkpoints: dict[int, KeptState] = field(default_factory=dict)
    saved: KeptState | None = None
    extra: Any = None
    """What the backend needs besides the native state (e.g. the trunk's last hidden row)."""

    def keep_first(self, length: int) -> None:
        """The state now stands for the first ``length`` tokens: later checkpoints are void."""
        del self.tokens[length:]
        self.checkpoints = {
            point: state for point, state in self.checkpoints.items() if point <= length
        }


class KeptStates:
    """The live session of each lane, the saved sessions, and every kept state, bounded
    together by ``budget_bytes``.

    Least recently used goes first: a saved session (with its checkpoints), or one checkpoint
    (never a live session itself, whose state lives in its context). A checkpoint may be
    shared by a saved copy and the live session it was copied from; it is counted once.
    """

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self.live: dict[str, Session] = {}
        self.saved: list[Session] = []
        self._clock = itertools.count(1)

    def live_session(self, lane: str) -> Session:
        session = self.live.get(lane)  # called per decoded token: build a Session only once
        if session is None:
            session = self.live[lane] = Session(lane)
        return session

    def saved_sessions(self, lane: str) -> list[Session]:
        return [session for session in self.saved if session.lane == lane]

    @property
    def total_bytes(self) -> int:
        return sum(state.nbytes for state in self._states())

    def _states(self) -> list[KeptState]:
        states: dict[int, KeptState] = {}
        for session in (*self.live.values(), *self.saved):
            for state in session.checkpoints.values():
                states[id(state)] = state
            if session.saved is not None:
                states[id(session.saved)] = session.saved
        return list(states.values())

    def touch(self, state: KeptState) -> None:
        state.last_used = next(self._clock)

    def add_checkpoint(self, lane: str, length: int, state: KeptState) -> None:
        self.touch(state)
        self.live_session(lane).checkpoints[length] = state
        self.evict()

    def save_copy_of_live(self, lane: str, state: KeptState, extra: Any) -> None:
        """Keep the live session of ``lane`` as it is now (its whole state in ``state``)."""
        live = self.live_session(lane)
        self.touch(state)
        self.saved.append(
            Session(lane, list(live.tokens), dict(live.checkpoints), saved=state, extra=extra)
        )
        self.evict()

    def restore(self, session: Session) -> None:
        """``session``'s state went back into its context: it becomes that lane's live one."""
        self.saved.remove(session)
        session.saved = None
        self.live[session.lane] = session

    def forget_live(self, lane: str) -> None:
        self.live[lane] = Session(lane)

    def clear(self) -> None:
        self.live = {}
        self.saved = []

    def evict(self) -> None:
        while self.total_bytes > self.budget_bytes:
            oldest = min(self._states(), key=lambda state: state.last_used)
            self.saved = [session for session in self.saved if session.saved is not oldest]
            for session in (*self.live.values(), *self.saved):
                session.checkpoints = {
                    point: state
                    for point, state in session.checkpoints.items()
                    if state is not oldest
                }
