"""Running requests on llama.cpp: prefill with prefix reuse, plain steps, drafts, verify, rollback.

The decoding loop (:mod:`app.engine.runtime.speculative`) calls these through the backend facade. A
request decoded with drafts runs on the drafting lane (the target that keeps recurrent-state
snapshots, and its drafter); one decoded without them on the plain lane, whose context is opened the
first time a request runs plainly (see :mod:`.backend`). Rows for the drafter pair token x_p with
the trunk's hidden state h_{p−1} (docs/architecture.md#the-llamacpp-backend, step 5): a prompt's are
handed over chunk by chunk, a step's and an accepted verify's as they are committed.

A prompt may hold images (cells of pseudo-ids, :mod:`..image_cells`): each is evaluated by the
projector (:mod:`.image_input`) between the text batches; the drafter gets no rows for it, and the
first text row after it pairs with the image's last hidden row
(docs/vision.md#images-in-generation-mtp-drafts-kept). Cells and positions then differ:
``n_past`` counts cells (the context window is cells), and every batch, draft and cut is placed
by position, ``n_past − shift``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.backends.image_cells import (
    ImageRun,
    image_runs,
    position_at,
    text_boundaries,
)
from app.engine.runtime.backends.llama_cpp.batch import NumpyBatch
from app.engine.runtime.backends.llama_cpp.image_input import ImageInput
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
        images: ImageInput | None = None,
    ) -> None:
        self._info = info
        self._images = images
        self._model_name = info.path.name
        self._drafting = drafting
        self._plain = plain
        self._open_plain = open_plain
        self.kept = kept
        self._batch = batch
        self.lane = drafting
        self.n_past = 0
        self.shift = 0
        """Cells of images in the context that advance no position (``n_past − shift`` is the
        next position)."""
        self.images_encoded = 0
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
        self.n_past = self.shift = 0
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
        self.images_encoded = 0
        try:
            start, source, continuing = self.kept.resume(lane, tokens, with_mtp)
            logits = self._run_prompt(
                lane, tokens, start, with_mtp, continuing=continuing, keep_at=keep_at
            )
        except BaseException:
            self.kept.forget(lane)
            self.n_past = self.shift = 0
            raise
        finally:
            if self._images is not None:
                self._images.release()
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
            marks = text_boundaries(tokens, checkpoint_marks(start, len(tokens), wanted=keep_at))
        if start == 0:
            previous_hidden: np.ndarray | None = np.zeros(self._info.embedding_length, np.float32)
        else:
            previous_hidden = lane.hidden_last if continuing else None
        cell, position = start, position_at(tokens, start)
        for end, run in self._prompt_pieces(tokens, start, marks):
            if run is not None:
                previous_hidden = self._run_image(lane, run, position, with_mtp)
                position += run.n_positions
            else:
                chunk = tokens[cell:end]
                outputs = "last" if end == len(tokens) else "none"
                lane.trunk.decode(
                    self._batch.fill(chunk, position, outputs=outputs, seq=lane.seq), "the prompt"
                )
                if with_mtp:
                    previous_hidden = self._prompt_rows(lane, chunk, position, previous_hidden)
                position += len(chunk)
            live.tokens.extend(tokens[cell:end])
            cell = end
            if end in marks:
                self.kept.keep_checkpoint(lane, end)
        self.n_past = len(tokens)
        self.shift = len(tokens) - position
        self._head_active = with_mtp
        lane.drafter_in_step = with_mtp
        if with_mtp:
            lane.hidden_last = previous_hidden
        return lane.trunk.logits_rows(1)[0].copy()

    def _prompt_pieces(
        self, tokens: Sequence[int], start: int, marks: Sequence[int]
    ) -> list[tuple[int, ImageRun | None]]:
        """The prompt from ``start`` as (end, image or None for text) pieces: text in batches
        that end at every mark, each image whole; the last piece is text (its logits start the
        reply)."""
        pieces: list[tuple[int, ImageRun | None]] = []
        cell = start
        for run in [*image_runs(tokens, start), None]:
            text_end = len(tokens) if run is None else run.start
            pieces += [
                (end, None) for end in chunk_ends(cell, text_end, marks, self._batch.capacity)
            ]
            if run is not None:
                pieces.append((run.end, run))
                cell = run.end
        if not pieces or pieces[-1][1] is not None:
            raise RuntimeBackendError("a prompt cannot end with an image: text must follow it")
        return pieces

    def _run_image(
        self, lane: Lane, run: ImageRun, position: int, with_mtp: bool
    ) -> np.ndarray | None:
        """Evaluate one image of the prompt; its last row's hidden state when drafting (the
        drafter pairs the first text token after the image with it)."""
        if self._images is None:
            raise RuntimeBackendError(
                f"{self._model_name} has no vision projector, so it cannot read images"
            )
        hidden = self._images.evaluate(
            run, lane.trunk, position, self._batch.capacity, with_hidden=with_mtp
        )
        self.images_encoded += 1
        return hidden

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
        position = self.n_past - self.shift
        lane.trunk.decode(
            self._batch.fill([token], position, outputs="all", seq=lane.seq), "a token"
        )
        if self._head_active:
            # The drafter's row for ``token`` pairs it with the hidden state before it; it is
            # run with the next draft (docs/architecture.md#the-llamacpp-backend, step 5).
            lane.drafter.commit_rows(position, (token,), (lane.hidden_last[None, :],))
            lane.hidden_last = lane.trunk.hidden_rows(1)[0].copy()
        self.kept.live(lane).tokens.append(token)
        self.n_past += 1
        return lane.trunk.last_logits()  # a view: the loop samples from it before the next decode

    def draft(self, last_token: int, depth: int, choose: DraftChooser) -> DraftResult:
        self._require_head("draft")
        lane = self._drafting
        position = self.n_past - self.shift
        return lane.drafter.draft(last_token, lane.hidden_last, position, depth, choose)

    def verify(self, tokens: Sequence[int]) -> VerifyResult:
        self._require_head("verify drafts")
        self._info.require_room(self.n_past, len(tokens))
        lane = self._drafting
        start = self.n_past
        lane.trunk.decode(
            self._batch.fill(tokens, start - self.shift, outputs="all", seq=lane.seq),
            "a verify batch",
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
        kept_position = committed_length - self.shift
        if committed_length < self.n_past and not lane.trunk.keep_first(lane.seq, kept_position):
            raise RuntimeBackendError(
                f"llama.cpp refused to roll {self._model_name} back to {committed_length} "
                f"tokens; the model's recurrent state keeps {self._info.max_draft_depth} "
                "snapshots, so use an MTP depth no larger than that"
            )
        kept = hidden[: accepted + 1].copy()  # the queued rows outlive the next trunk decode
        rows = [hidden_before[None, :], *(kept[i : i + 1] for i in range(accepted))]
        lane.drafter.commit_rows(start - self.shift, tokens[: accepted + 1], rows)
        lane.hidden_last = kept[accepted]
        del self.kept.live(lane).tokens[committed_length:]
        self.n_past = committed_length

    def _require_head(self, action: str) -> None:
        if not self._head_active:
            raise RuntimeBackendError(
                f"cannot {action}: this request was prefilled without the MTP head "
                "(prefill with_mtp=True first); the decoding loop is out of order"
            )
