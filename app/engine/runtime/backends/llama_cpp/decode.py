"""Running requests on llama.cpp: prefill with prefix reuse, plain steps, drafts, verify, rollback.

The decoding loop (:mod:`app.engine.runtime.speculative`) calls these through the backend facade. A
request decoded with drafts runs on the drafting lane (the target that keeps recurrent-state
snapshots, and its drafter); one decoded without them on the plain lane, whose context is opened the
first time a request runs plainly (see :mod:`.backend`). Rows for the drafter pair token x_p with
the trunk's hidden state h_{p−1} (docs/architecture.md#the-llamacpp-backend, step 5): a prompt's are
handed over chunk by chunk, a step's and an accepted verify's as they are committed."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.backends.llama_cpp.batch import NumpyBatch
from app.engine.runtime.backends.llama_cpp.kept_states import KeptLanes, Lane
from app.engine.runtime.backends.prefix_cache import checkpoint_marks, chunk_ends
from app.engine.runtime.core.backend import DraftChooser, DraftResult, ModelInfo, VerifyResult


class Decoder:
    """The request state of one model: which lane is active, how many tokens it holds, and
    what the last verify left for :meth:`rollback`.

    ``plain`` is the lane of plain requests: the drafting lane itself when the model keeps no
    snapshots, else None until ``open_plain`` opens it on the first plain request.
    """

    def __init__(
        self,
        info: ModelInfo,
        drafting: Lane,
        plain: Lane | None,
        open_plain: Callable[[], Lane],
        kept: KeptLanes,
        batch: NumpyBatch,
    ) -> None:
        self._info = info
        self._model_name = info.path.name
        self._drafting = drafting
        self._plain = plain
        self._open_plain = open_plain
        self.kept = kept
        self._batch = batch
        self.lane = drafting
        self.n_past = 0
        self._head_active = False
        self._verified: tuple[int, Sequence[int], np.ndarray, np.ndarray] | None = None

    def _lanes(self) -> list[Lane]:
        return list(dict.fromkeys(lane for lane in (self._drafting, self._plain) if lane))

    def reset(self) -> None:
        for lane in self._lanes():
            lane.trunk.clear()
            if lane.drafter is not None:
                lane.drafter.clear()
            lane.drafter_in_step = False
        self.kept.clear()
        self.n_past = 0
        self._head_active = False
        self._verified = None

    def reusable_prefix(self, tokens: Sequence[int], with_mtp: bool) -> int:
        if with_mtp and self._drafting.drafter is None:
            return 0
        lane = self._drafting if with_mtp else self._plain
        return 0 if lane is None else self.kept.reusable_prefix(lane, tokens, with_mtp)

    def prefill(
        self, tokens: Sequence[int], with_mtp: bool, keep_at: Sequence[int]
    ) -> tuple[np.ndarray, int, str]:
        """Run the prompt from its longest kept prefix; its last logits row, the kept length
        and where it came from."""
        if with_mtp and self._drafting.drafter is None:
            raise RuntimeBackendError(
                f"{self._model_name} has no usable MTP head: {self._info.mtp_unavailable_reason}"
            )
        self._info.require_room(0, len(tokens))
        if with_mtp:
            lane = self._drafting
            lane.trunk.export_hidden_rows()
        else:
            if self._plain is None:
                self._plain = self._open_plain()
            lane = self._plain
        self.lane = lane
        self._verified = None
        try:
            start, source, continuing = self.kept.resume(lane, tokens, with_mtp)
            logits = self._run_prompt(
                lane, tokens, start, with_mtp, continuing=continuing, keep_at=keep_at
            )
        except BaseException:
            self.kept.forget(lane)
            self.n_past = 0
            raise
        return logits, start, source

    def _run_prompt(
        self,
        lane: Lane,
        tokens: Sequence[int],
        start: int,
        with_mtp: bool,
        *,
        continuing: bool,
        keep_at: Sequence[int],
    ) -> np.ndarray:
        """Compute ``tokens[start:]`` after a resume at ``start``; the last row's logits.

        The drafter's row at p pairs x_p with h_{p-1}: continuing the live state, the first
        row takes the kept last hidden state; after a rewind the head already holds the row at
        ``start`` (it keeps one row more than the trunk), so its rows begin at ``start + 1``.
        """
        live = self.kept.live(lane)
        continuing = continuing and start > 0
        marks: list[int] = []
        if self.kept.recurrent:
            if continuing and start not in live.checkpoints:
                self.kept.keep_checkpoint(lane, start)  # the end of the last committed reply
            marks = checkpoint_marks(start, len(tokens), wanted=keep_at)
        if start == 0:
            previous_hidden: np.ndarray | None = np.zeros(self._info.embedding_length, np.float32)
        else:
            previous_hidden = lane.hidden_last if continuing else None
        position = start
        for end in chunk_ends(start, len(tokens), marks, self._batch.capacity):
            chunk = tokens[position:end]
            outputs = "last" if end == len(tokens) else "none"
            lane.trunk.decode(
                self._batch.fill(chunk, position, outputs=outputs, seq=lane.seq), "the prompt"
            )
            if with_mtp:
                previous_hidden = self._prompt_rows(lane, chunk, position, previous_hidden)
            live.tokens.extend(chunk)
            position = end
            if end in marks:
                self.kept.keep_checkpoint(lane, end)
        self.n_past = len(tokens)
        self._head_active = with_mtp
        lane.drafter_in_step = with_mtp
        if with_mtp:
            lane.hidden_last = previous_hidden
        return lane.trunk.logits_rows(1)[0].copy()

    def _prompt_rows(
        self, lane: Lane, chunk: Sequence[int], position: int, previous: np.ndarray | None
    ) -> np.ndarray:
        """Hand the chunk's drafter rows over; the chunk's last hidden row (h of its end)."""
        assert lane.drafter is not None
        hidden = lane.trunk.hidden_rows(len(chunk))
        if previous is None:
            lane.drafter.prompt_rows(position + 1, chunk[1:], hidden[:-1])
        else:
            lane.drafter.prompt_rows(position, chunk, np.vstack([previous[None, :], hidden[:-1]]))
        return hidden[-1].copy()

    def step(self, token: int) -> np.ndarray:
        lane = self.lane
        if self.n_past >= self._info.context_length:
            self._info.require_room(self.n_past, 1)
        lane.trunk.decode(
            self._batch.fill([token], self.n_past, outputs="all", seq=lane.seq), "a token"
        )
        if self._head_active:
            # The drafter's row for ``token`` pairs it with the hidden state before it; it is
            # run with the next draft (docs/architecture.md#the-llamacpp-backend, step 5).
            lane.drafter.commit_rows(self.n_past, (token,), (lane.hidden_last[None, :],))
            lane.hidden_last = lane.trunk.hidden_rows(1)[0].copy()
        self.kept.live(lane).tokens.append(token)
        self.n_past += 1
        return lane.trunk.logits_rows(1)[
            0
        ]  # a view: the loop samples from it before the next decode

    def draft(self, last_token: int, depth: int, choose: DraftChooser) -> DraftResult:
        self._require_head("draft")
        lane = self._drafting
        return lane.drafter.draft(last_token, lane.hidden_last, self.n_past, depth, choose)

    def verify(self, tokens: Sequence[int]) -> VerifyResult:
        self._require_head("verify drafts")
        self._info.require_room(self.n_past, len(tokens))
        lane = self._drafting
        start = self.n_past
        lane.trunk.decode(
            self._batch.fill(tokens, start, outputs="all", seq=lane.seq), "a verify batch"
        )
        # Views of llama.cpp's buffers: the cycle decides and rolls back before the next decode;
        # rollback copies the hidden rows it keeps.
        logits = lane.trunk.logits_rows(len(tokens))
        hidden = lane.trunk.hidden_rows(len(tokens))
        self._verified = (start, tuple(tokens), hidden, lane.hidden_last)
        self.kept.live(lane).tokens.extend(tokens)
        self.n_past = start + len(tokens)
        return VerifyResult(logits, hidden)

    def rollback(self, committed_length: int) -> None:
        if self._verified is None:
            raise RuntimeBackendError(
                "rollback without a verify: the decoding loop is out of order"
            )
        start, tokens, hidden, hidden_before = self._verified
        self._verified = None
        accepted = committed_length - start - 1
        if not 0 <= accepted < len(tokens):
            raise RuntimeBackendError(
                f"cannot commit {committed_length} tokens after verifying positions "
                f"{start}..{start + len(tokens) - 1}"
            )
        lane = self._drafting
        if committed_length < self.n_past and not lane.trunk.keep_first(lane.seq, committed_length):
            raise RuntimeBackendError(
                f"llama.cpp refused to roll {self._model_name} back to {committed_length} "
                f"tokens; the model's recurrent state keeps {self._info.max_draft_depth} "
                "snapshots, so use an MTP depth no larger than that"
            )
        kept = hidden[: accepted + 1].copy()  # the queued rows outlive the next trunk decode
        rows = [hidden_before[None, :], *(kept[i : i + 1] for i in range(accepted))]
        lane.drafter.commit_rows(start, tokens[: accepted + 1], rows)
        lane.hidden_last = kept[accepted]
        del self.kept.live(lane).tokens[committed_length:]
        self.n_past = committed_length

    def _require_head(self, action: str) -> None:
        if not self._head_active:
            raise RuntimeBackendError(
                f"cannot {action}: this request was prefilled without the MTP head "
                "(prefill with_mtp=True first); the decoding loop is out of order"
            )
