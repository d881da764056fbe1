"""Images on the MLX backend, through mlx-vlm's own model classes (docs/vision.md#mlx).

A model folder whose ``config.json`` has a ``vision_config`` (a Qwen3.5/3.6 release converted by
``mlx_vlm.convert``) reads pictures when mlx-vlm is installed (the ``vision-mlx`` extra). mlx-vlm
loads the folder's vision tower and its language model; the language model's weights are the very
arrays mlx-lm already loaded for the trunk (their names and shapes match), so the model is not in
memory twice.

A prompt's pictures go as mlx-vlm's ``generate`` sends them: the processor scales each picture
(once per picture, kept by content) and its ``<|image_pad|>`` tokens are written into the prompt,
``get_input_embeddings`` runs the vision tower and projector and merges the features into the
prompt's embeddings with M-RoPE positions (``get_rope_index``), then the language model prefills in
mlx-vlm's chunks and decodes with mlx-vlm's own caches and the same ``rope_deltas``.

The model's MTP head drafts after a picture as it does for text: its rows are (token x_p, the
hidden state h_{p−1} mlx-vlm's language model returns with ``return_hidden``), a picture's cells
given as the ``<|image_pad|>`` tokens the model itself reads there; a verify runs the drafts through
mlx-vlm's language model, and a rejected draft is rolled back by putting the caches back as they
were before the verify (an attention cache cut back by its offset, a gated-delta-net state kept by
reference: mlx arrays are immutable) and running the accepted tokens again — the exact reference
path of the text backend; mlx-vlm's gated-delta layers are not wrapped for per-token states. A
separate drafter (Gemma 4's) is not paired here: such a prompt decodes plainly, and the reply's note
says so.

In the token list a picture stands as one pseudo-id per cell (:mod:`..image_cells`), keyed by its
pixel hash. The lane keeps the state of its last prompt and reply, and a snapshot at the end of
that prompt (an attention cache is cut back by its offset, a gated-delta-net state is kept by
reference: mlx arrays are immutable). A follow-up whose prompt starts with either and adds only
text (another question about the same picture: the previous prompt, the reply, the new question)
runs only the new text, so the picture is not encoded again (the head's rows resumed with it; a
drafting request does not resume a state a plain one left, whose head rows stop short). Anything
else (an edited message, another picture) runs the prompt afresh.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
from mlx_lm.models.cache import KVCache

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.backends.image_cells import has_images, image_at, image_cells, image_runs
from app.engine.runtime.backends.mlx.drafting import HeadDrafter
from app.engine.runtime.backends.mlx.kept_states import Conversation
from app.engine.runtime.backends.prefix_cache import common_prefix_length
from app.engine.runtime.chat_format.images import ImagePart, RgbImage, rgb_pixels
from app.engine.runtime.core.backend import DraftChooser, DraftResult, PrefixReuse, VerifyResult

PREFILL_STEP = 2048
"""mlx-vlm's own prefill chunk (``DEFAULT_PREFILL_STEP_SIZE``): the same chunks, the same sums."""

_PREPARED_KEPT = 8
"""Pictures kept prepared by file hash: a request renders its prompt more than once (the whole,
and up to its last user message), and a conversation re-sends its pictures every turn."""

PLAIN_WITH_IMAGES = (
    "a prompt with pictures decodes without MTP drafts on the MLX backend when the model drafts "
    "with a separate drafter (only its own MTP head drafts after a picture: docs/vision.md#mlx)"
)

VISION_START = "<|vision_start|>"
VISION_END = "<|vision_end|>"
IMAGE_PAD = "<|image_pad|>"


@dataclass(frozen=True)
class _PreparedImage:
    """One picture as the processor prepared it: its patches, its (t, h, w) patch grid, the
    tokens it becomes and the M-RoPE positions they advance."""

    content_hash: str
    pixel_values: mx.array
    grid_thw: mx.array
    n_cells: int
    n_positions: int


@dataclass
class _LaneState:
    """What the lane holds: the conversation (cells, mlx-vlm's caches, the head's cache and the
    last hidden state), the M-RoPE offset of text, whether the head has rows for all of it, and
    a snapshot at the end of the last prompt (``prompt_cells``)."""

    live: Conversation
    rope_deltas: mx.array
    with_head: bool
    prompt_cells: tuple[int, ...] = ()
    prompt_snapshot: list[Any] = field(default_factory=list)
    prompt_hidden: mx.array | None = None

    def mark_prompt(self) -> None:
        self.prompt_cells = tuple(self.live.tokens)
        self.prompt_snapshot = _snapshot(self.live.trunk)
        self.prompt_hidden = self.live.hidden_last

    def resume_point(self, cells: list[int]) -> tuple[int, str]:
        """How many of ``cells`` the lane can keep (0: none) and from where (``live``: all it
        holds, ``checkpoint``: the prompt it snapshot), when ``cells`` starts with that and adds
        only text."""
        for kept, source in ((self.live.tokens, "live"), (self.prompt_cells, "checkpoint")):
            if (
                len(kept) < len(cells)
                and common_prefix_length(kept, cells) == len(kept)
                and not any(image_runs(cells, len(kept)))
            ):
                return len(kept), source
        return 0, ""

    def rewind(self, length: int) -> None:
        """Back to the prompt's snapshot when ``length`` is where it was taken."""
        if length == len(self.live.tokens):
            return
        assert length == len(self.prompt_cells), "the lane resumes at its end or its prompt's"
        _restore(self.live.trunk, self.prompt_snapshot)
        del self.live.tokens[length:]
        self.live.hidden_last = self.prompt_hidden


def _snapshot(caches: list[Any]) -> list[Any]:
    """Per cache: a recurrent layer's arrays (kept by reference) or an attention cache's offset."""
    return [list(cache.cache) if hasattr(cache, "cache") else cache.offset for cache in caches]


def _restore(caches: list[Any], snapshot: list[Any]) -> None:
    for cache, saved in zip(caches, snapshot, strict=True):
        if isinstance(saved, list):
            cache.cache = list(saved)
        else:
            cache.trim(cache.offset - saved)


class MlxVision:
    """A model folder's vision tower and language model in mlx-vlm, and the prompts with
    pictures that run through them."""

    def __init__(self, folder: Path, trunk_model: Any, drafter: HeadDrafter | None) -> None:
        from mlx.utils import tree_flatten
        from mlx_vlm import load

        try:
            self._model, self._processor = load(str(folder), lazy=True)
        except (ValueError, FileNotFoundError, OSError, KeyError) as exc:
            raise RuntimeBackendError(
                f"mlx-vlm could not load the vision tower of {folder.name}: "
                f"{str(exc).splitlines()[0][:200]}"
            ) from None
        language = self._model.language_model
        shared = tree_flatten(getattr(trunk_model, "language_model", trunk_model).parameters())
        own = dict(tree_flatten(language.parameters()))
        if {name for name, _ in shared} == set(own) and all(
            own[name].shape == value.shape for name, value in shared
        ):
            language.load_weights(shared, strict=True)  # the trunk's arrays, not a second copy
        mx.eval(self._model.parameters())
        self._language = language
        config = self._model.config
        self._image_token = int(config.image_token_index)
        self._merge = int(config.vision_config.spatial_merge_size)
        self._kept: OrderedDict[str, _PreparedImage] = OrderedDict()
        self._pending: dict[int, _PreparedImage] = {}
        self._state: _LaneState | None = None
        self._drafter = drafter
        self._tracking = False
        self._verified: tuple[Any, ...] | None = None
        self.last_reuse = PrefixReuse()

    # --- prompts ----------------------------------------------------------------------------

    def tokens(self, text: str, marker: str, images: Sequence[ImagePart]) -> list[int]:
        """``text`` with ``images`` at its ``marker`` places as cells, the text tokenized as
        the model's processor tokenizes it (each picture as its run of ``<|image_pad|>``); the
        pictures are prepared (scaled, patched) once each and kept for the prefill."""
        pieces = text.split(marker)
        if len(pieces) != len(images) + 1:
            raise RuntimeBackendError(
                f"the prompt places {len(pieces) - 1} pictures but the request has {len(images)}"
            )
        if any(IMAGE_PAD in piece for piece in pieces):
            raise RuntimeBackendError(
                f"the prompt's text contains {IMAGE_PAD}, which stands for a picture's tokens; "
                "remove it from the message"
            )
        prepared = [self._prepare(image) for image in images]
        prompt = pieces[0]
        for image, piece in zip(prepared, pieces[1:], strict=True):
            prompt += f"{VISION_START}{IMAGE_PAD * image.n_cells}{VISION_END}{piece}"
        ids = self._processor.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        return self._cells([int(token) for token in ids], prepared)

    def _prepare(self, image: ImagePart) -> _PreparedImage:
        """The picture as the model's image processor prepares it (kept by content)."""
        kept = self._kept.get(image.sha256)
        if kept is None:
            pixels = rgb_pixels(image)
            out = self._processor.image_processor(images=[_pil(pixels)])
            t, h, w = (int(v) for v in np.asarray(out["image_grid_thw"]).reshape(3))
            kept = _PreparedImage(
                pixels.content_hash,
                mx.array(out["pixel_values"]),
                mx.array([[t, h, w]]),
                t * h * w // (self._merge * self._merge),
                max(t, h // self._merge, w // self._merge),
            )
            self._kept[image.sha256] = kept
            while len(self._kept) > _PREPARED_KEPT:
                self._kept.popitem(last=False)
        self._kept.move_to_end(image.sha256)
        return kept

    def _cells(self, ids: list[int], prepared: list[_PreparedImage]) -> list[int]:
        """The token ids with each picture's run of pads as its pseudo-ids."""
        cells: list[int] = []
        pictures = iter(prepared)
        position = 0
        while position < len(ids):
            if ids[position] != self._image_token:
                cells.append(ids[position])
                position += 1
                continue
            image = next(pictures)
            if ids[position : position + image.n_cells] != [self._image_token] * image.n_cells:
                raise RuntimeBackendError("the tokenizer split a picture's tokens")
            run_ids = image_cells(image.content_hash, image.n_cells, image.n_positions)
            run = image_at(run_ids, 0)
            assert run is not None
            self._pending[run.key] = image
            cells.extend(run_ids)
            position += image.n_cells
        return cells

    # --- decoding ---------------------------------------------------------------------------

    @property
    def length(self) -> int:
        return len(self._state.live.tokens) if self._state is not None else 0

    def settle_head_rows(self) -> None:
        """Run the head rows still queued into the lane's conversation (the text path takes
        the model next, and the head's queue is shared)."""
        if self._state is not None and self._drafter is not None:
            self._drafter.keep_matching(self._state.live, len(self._state.live.tokens))
        self._tracking = False

    def plain_only_reason(self, tokens: Sequence[int]) -> str | None:
        """Why the prompt ``tokens`` decodes without drafts here (None: it may draft)."""
        return PLAIN_WITH_IMAGES if self._drafter is None and has_images(tokens) else None

    def reset(self) -> None:
        self._state = None
        self._tracking = False
        self._verified = None
        if self._drafter is not None:
            self._drafter.clear()
        self.last_reuse = PrefixReuse()

    def prefill(self, cells: Sequence[int], with_mtp: bool) -> np.ndarray:
        """Run the prompt ``cells``; the logits row of its last one. A follow-up that keeps
        everything the lane holds (or its last prompt) and adds only text runs only that text;
        with ``with_mtp`` the head gets its rows (a state made without them is not resumed)."""
        cells = list(cells)
        state, self._verified = self._state, None
        kept, source = (0, "")
        if state is not None and (state.with_head or not with_mtp):
            kept, source = state.resume_point(cells)
        if with_mtp and self._drafter is None:
            raise RuntimeBackendError(PLAIN_WITH_IMAGES)
        drafter = self._drafter if with_mtp else None
        try:
            if state is not None and kept:
                logits = self._resume(state, cells, kept, drafter)
            else:
                logits = self._fresh(cells, drafter)
        except BaseException:
            self._state = None
            raise
        self._tracking = drafter is not None
        encoded = 0 if kept else sum(1 for _ in image_runs(cells))
        self.last_reuse = PrefixReuse(kept, len(cells) - kept, source, encoded)
        self._pending = {}
        return logits

    def _fresh(self, cells: list[int], drafter: HeadDrafter | None) -> np.ndarray:
        runs = list(image_runs(cells))
        try:
            prepared = [self._pending[run.key] for run in runs]
        except KeyError:
            raise RuntimeBackendError(
                "a picture of the prompt was not prepared; the prompt must be made by the "
                "backend that runs it"
            ) from None
        ids = mx.array([self._ids(cells)])
        embedded = self._model.get_input_embeddings(
            ids,
            mx.concatenate([image.pixel_values for image in prepared]),
            image_grid_thw=mx.concatenate([image.grid_thw for image in prepared]),
        )
        embeds = embedded.inputs_embeds
        extra = {"position_ids": embedded.position_ids, "rope_deltas": embedded.rope_deltas}
        self._language._position_ids = None  # mlx-vlm's generate clears them the same way
        self._language._rope_deltas = None
        live = Conversation(-1, [], self._language.make_cache(), KVCache() if drafter else None)
        if drafter is not None:
            drafter.clear()
        ends, done = [], 0
        while len(cells) - done > 1:  # mlx-vlm's chunks: the last cell alone
            done += min(PREFILL_STEP, len(cells) - done - 1)
            ends.append(done)
        ends.append(len(cells))
        logits = None
        for first, end in zip([0, *ends[:-1]], ends, strict=True):
            output = self._language(
                ids[:, first:end],
                inputs_embeds=embeds[:, first:end],
                cache=live.trunk,
                return_hidden=drafter is not None,
                **extra,
            )
            self._absorb(live, cells[first:end], output, drafter)
            logits = output.logits
        self._state = _LaneState(live, embedded.rope_deltas, drafter is not None)
        self._state.mark_prompt()
        assert logits is not None
        return _last_row(logits)

    def _absorb(
        self, live: Conversation, chunk: list[int], output: Any, drafter: HeadDrafter | None
    ) -> None:
        """A chunk run: its cells committed, its head rows handed over, the caches evaluated."""
        evaluate = [cache.state for cache in live.trunk]
        if drafter is not None:
            hidden = output.hidden_states[-1][0]
            previous = live.hidden_last
            if previous is None:
                row_ids, rows = self._ids(chunk[1:]), hidden[:-1]
            else:
                row_ids, rows = self._ids(chunk), mx.concatenate([previous[None], hidden[:-1]])
            if row_ids:
                drafter.prompt_rows(row_ids, rows[None], live)
            evaluate.extend(drafter.arrays(live))
            live.hidden_last = hidden[-1]
        mx.eval(evaluate)
        live.tokens.extend(chunk)

    def _resume(
        self, state: _LaneState, cells: list[int], kept: int, drafter: HeadDrafter | None
    ) -> np.ndarray:
        live = state.live
        if drafter is not None and kept == len(live.tokens):
            drafter.keep_matching(live, kept)  # run the rows still queued
        elif drafter is not None:
            drafter.clear()
            drafter.resume(live, kept - 1)
        state.rewind(kept)
        state.with_head = drafter is not None
        new = cells[kept:]
        output = self._language(
            mx.array([self._ids(new)]),
            cache=live.trunk,
            rope_deltas=state.rope_deltas,
            return_hidden=drafter is not None,
        )
        self._absorb(live, new, output, drafter)
        state.mark_prompt()
        return _last_row(output.logits)

    def step(self, token: int) -> np.ndarray:
        live = self._live()
        output = self._run([token], live)
        hidden = output.hidden_states[-1][0] if self._tracking else None
        if hidden is not None:
            assert self._drafter is not None and live.hidden_last is not None
            self._drafter.commit_row(token, live.hidden_last)
            live.hidden_last = hidden[-1]
        elif self._state is not None:
            self._state.with_head = False
        live.tokens.append(token)
        return _last_row(output.logits)

    def draft(self, last_token: int, depth: int, choose: DraftChooser) -> DraftResult:
        live = self._live()
        if self._drafter is None or not self._tracking or live.hidden_last is None:
            raise RuntimeBackendError("drafting needs a prefill with the MTP head first")
        return self._drafter.draft(live, last_token, live.hidden_last, depth, choose)

    def verify(self, tokens: Sequence[int]) -> VerifyResult:
        live = self._live()
        snapshot = _snapshot(live.trunk)
        output = self._run(list(tokens), live)
        hidden = output.hidden_states[-1][0]
        logits = np.array(output.logits[0].astype(mx.float32))
        assert live.hidden_last is not None
        self._verified = (len(live.tokens), tuple(tokens), hidden, live.hidden_last, snapshot)
        live.tokens.extend(tokens)
        return VerifyResult(logits, np.array(hidden.astype(mx.float32)))

    def rollback(self, committed_length: int) -> None:
        """Keep the first accepted verified tokens: the caches put back as before the verify
        and the accepted tokens run again (mlx-vlm's gated-delta states cannot be cut back)."""
        if self._verified is None or self._drafter is None:
            raise RuntimeBackendError(
                "rollback without a verify: the decoding loop is out of order"
            )
        (start, tokens, hidden, before, snapshot), self._verified = self._verified, None
        accepted = committed_length - start - 1
        if not 0 <= accepted < len(tokens):
            raise RuntimeBackendError(
                f"cannot commit {committed_length} tokens after verifying positions "
                f"{start}..{start + len(tokens) - 1}"
            )
        live = self._live()
        del live.tokens[committed_length:]
        if accepted + 1 < len(tokens):
            _restore(live.trunk, snapshot)
            self._run(list(tokens[: accepted + 1]), live)
            mx.eval([cache.state for cache in live.trunk])
        self._drafter.commit_rows(live, start, tokens[: accepted + 1], before, hidden)
        live.hidden_last = hidden[accepted]

    def _live(self) -> Conversation:
        if self._state is None:
            raise RuntimeBackendError("a step without a prefill: the decoding loop is out of order")
        return self._state.live

    def _run(self, tokens: list[int], live: Conversation) -> Any:
        assert self._state is not None
        return self._language(
            mx.array([tokens]),
            cache=live.trunk,
            rope_deltas=self._state.rope_deltas,
            return_hidden=self._tracking,
        )

    def _ids(self, cells: Sequence[int]) -> list[int]:
        """Token ids for the model: a picture's cells are its ``<|image_pad|>`` tokens."""
        return [self._image_token if cell < 0 else cell for cell in cells]


def _last_row(logits: mx.array) -> np.ndarray:
    return np.array(logits[0, -1].astype(mx.float32))


def _pil(image: RgbImage) -> Any:
    from PIL import Image

    return Image.frombytes("RGB", (image.width, image.height), image.pixels)
