"""Prefix reuse on MLX: which kept conversation a prompt resumes from, and making it live.

The live conversation keeps the tokens its caches stand for; a prefill resumes at the longest
usable prefix of the live state, a checkpoint or a saved conversation
(:mod:`~app.engine.runtime.backends.mlx.kept_states`) and computes only the rest. The choice is
the shared planner's (:func:`~app.engine.runtime.backends.prefix_cache.plan_resume`); this module
says where each conversation can resume and moves the caches.

A trunk with recurrent layers resumes only at a checkpoint: the marks
:func:`~app.engine.runtime.backends.prefix_cache.checkpoint_marks` picks inside a prompt, the end
of each reply as the next prefill finds it, and the state before the last verify when a prompt
diverges inside it. An attention-only trunk resumes anywhere. The head resumes with the trunk:
each checkpoint keeps h_{s−1}, so after trimming the head to rows 1..s−1 the first computed row
(x_s, h_{s−1}) is exact. That costs one hidden vector per checkpoint; the alternative (resuming the
trunk one token earlier to recompute h_{s−1}) needs a recurrent state one token before every
checkpoint, which would double them. An attention-only trunk does take that route where no hidden
is kept: it resumes at s with the head holding rows 1..s, so the first computed token's hidden
feeds row s+1. A head left behind the trunk (requests without MTP do not run it) is not caught
up: the prefill resumes from the latest point the head still covers, exact at the cost of the
trunk recompute.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlx_lm.models.cache import KVCache

from app.engine.runtime.backends.mlx import trunk_caches
from app.engine.runtime.backends.mlx.kept_states import Checkpoint, Conversation, KeptStates
from app.engine.runtime.backends.prefix_cache import (
    SAVE_MIN_TOKENS,
    ResumeOption,
    ResumePlan,
    common_prefix_length,
    plan_resume,
)


class Conversations:
    """The live conversation and the kept states; ``make_trunk_cache`` gives a fresh trunk
    cache list, ``with_head`` says whether conversations carry a head cache."""

    def __init__(
        self,
        kept: KeptStates,
        make_trunk_cache: Callable[[], list[Any]],
        *,
        with_head: bool,
        recurrent: bool,
    ) -> None:
        self.kept = kept
        self._make_trunk_cache = make_trunk_cache
        self._with_head = with_head
        self.recurrent = recurrent
        self._serial = 0
        self.live = self.new()
        self.last_verify: Checkpoint | None = None
        """The state before the last verify (a resume point when a prompt diverges in it)."""

    def new(self) -> Conversation:
        self._serial += 1
        head = KVCache() if self._with_head else None
        return Conversation(self._serial, [], self._make_trunk_cache(), head)

    def reset(self) -> None:
        self.kept.clear()
        self.live = self.new()
        self.last_verify = None

    def close(self) -> None:
        """Let go of every cache (the backend is closed)."""
        self.kept.clear()
        self.live = Conversation(0, [], [], None)
        self.last_verify = None

    def drop_live(self) -> None:
        """A half-run prompt leaves caches that no token list describes: start afresh."""
        self.kept.forget(self.live.ident)
        self.live = self.new()

    def settle(self, shared: int, prompt_length: int) -> None:
        """Close the previous request before a prompt that shares ``shared`` tokens with it:
        keep a checkpoint at the end of its reply (or before its last verify) when the prompt
        reaches it."""
        live = self.live
        if self.recurrent:
            limit = min(shared, prompt_length - 1)
            arrays = trunk_caches.recurrent_arrays(live.trunk)
            end = Checkpoint(len(live.tokens), arrays, live.hidden_last)
            for candidate in (end, self.last_verify):
                if candidate is not None and 0 < candidate.position <= limit:
                    self.kept.add_checkpoint(live.ident, candidate)
                    break
        self.last_verify = None

    def plan(self, tokens: list[int], with_mtp: bool) -> ResumePlan:
        """The kept state that leaves the fewest prompt tokens to compute (the live one on a
        tie); with ``with_mtp`` only where the head's cache covers the rows before it."""

        def options(conversation: Conversation, shared: int) -> tuple[int, list[ResumeOption]]:
            head_rows = _head_rows(conversation, shared)
            limit = min(shared, len(tokens) - 1)
            points = self._resume_points(conversation, limit, head_rows)
            return head_rows, [
                ResumeOption(point.position, point.hidden is not None, point) for point in points
            ]

        conversations = [self.live, *self.kept.saved()]
        return plan_resume(
            tokens, conversations, options, with_mtp=with_mtp, recurrent=self.recurrent
        )

    def _resume_points(
        self, conversation: Conversation, limit: int, head_rows: int
    ) -> list[Checkpoint]:
        """Where ``conversation`` can resume, at positions 1..``limit``: its checkpoints and its
        end; an attention-only trunk also at ``limit`` itself and where its head's rows end
        (without a hidden state: the head then needs its row for that position)."""
        end = len(conversation.tokens)
        points = []
        if not self.recurrent:
            points = [Checkpoint(limit, (), None), Checkpoint(min(limit, head_rows), (), None)]
        points += [c for c in self.kept.checkpoints(conversation.ident) if c.position <= limit]
        if end <= limit and conversation.hidden_last is not None:
            arrays = trunk_caches.recurrent_arrays(conversation.trunk)
            points.append(Checkpoint(end, arrays, conversation.hidden_last))
        return [point for point in points if point.position > 0]

    def adopt(self, plan: ResumePlan, tokens: list[int]) -> None:
        """Make ``plan``'s conversation live, cut to its resume point. A conversation that
        would lose a long stretch the new prompt does not repeat (another conversation, an edit
        far back) is saved whole first and the prompt continues a copy of its kept prefix."""
        chosen, position = plan.session, plan.position
        if chosen is not self.live:
            live = self.live
            if _worth_keeping(live, common_prefix_length(live.tokens, tokens), len(tokens)):
                self.kept.save(live)
            else:
                self.kept.forget(live.ident)
            self.kept.take(chosen.ident)
            self.live = chosen
        if _worth_keeping(chosen, plan.shared, len(tokens)):
            self.live = self._fork(chosen, position, plan.shared)
            self.kept.save(chosen)
        else:
            self.kept.forget_checkpoints_after(chosen.ident, plan.shared)
            del chosen.tokens[position:]
            trunk_caches.trim_kv(chosen.trunk, position)
            if chosen.head is not None:
                valid = _head_rows(chosen, plan.shared)
                chosen.head.trim(chosen.head.offset - valid)
        checkpoint = plan.option.state if plan.option is not None else None
        trunk_caches.set_recurrent(
            self.live.trunk, checkpoint.recurrent if checkpoint is not None else ()
        )
        self.kept.touch(chosen.ident, position)

    def _fork(self, source: Conversation, position: int, shared: int) -> Conversation:
        """A new conversation holding the first ``position`` tokens of ``source`` (KV slices: new
        arrays, so ``source`` stays intact); recurrent arrays are set from the checkpoint."""
        fork = self.new()
        fork.tokens = source.tokens[:position]
        for kept, new in zip(source.trunk, fork.trunk, strict=True):
            if trunk_caches.is_kv(kept) and position > 0:
                trunk_caches.copy_kv(kept, new, position)
        if source.head is not None and fork.head is not None:
            rows = _head_rows(source, shared)
            if rows > 0:
                trunk_caches.copy_kv(source.head, fork.head, rows)
        self.kept.share_checkpoints(source.ident, fork.ident, shared)
        return fork


def _head_rows(conversation: Conversation, shared: int) -> int:
    """Head rows still right for a prompt sharing ``shared`` tokens: row p needs x_0..x_p. A
    conversation without a head cache (no drafter, or one that reads only the trunk's cache)
    is never behind the trunk."""
    if conversation.head is None:
        return shared
    return min(conversation.head.offset, max(shared - 1, 0))


def _worth_keeping(conversation: Conversation, shared: int, prompt_length: int) -> bool:
    """True when a prompt would drop a long stretch of ``conversation`` that it does not repeat
    (not a regenerate, where the prompt is a prefix of it)."""
    length = len(conversation.tokens)
    return shared < min(prompt_length, length) and length - shared >= SAVE_MIN_TOKENS
