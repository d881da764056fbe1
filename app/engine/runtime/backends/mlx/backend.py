"""The MLX backend: a model folder loaded with stock mlx-lm, plus an MTP head built here.

The trunk is whatever ``mlx_lm.load`` gives (4-bit, 8-bit, BF16; Metal on Apple silicon, CPU on
Linux). Its inner model returns post-norm hidden states, which is what the head consumes, so the
trunk runs unpatched: hidden = ``model.model(tokens, cache)``, logits = its ``lm_head`` (or the tied
embedding). The head (:mod:`~app.engine.runtime.backends.mlx.heads`) comes from a sidecar or the
folder's own ``mtp.*`` tensors (:mod:`~app.engine.runtime.backends.mlx.sidecar`); when there is
none, or it does not fit, the model decodes plainly and ``ModelInfo.mtp_unavailable_reason`` says
why. A Gemma 4 target drafts instead with its separate drafter model
(:mod:`~app.engine.runtime.backends.mlx.gemma4_drafting`; ``LoadSettings.drafter``, else the
drafter folder beside it), and then keeps its sliding-window layers un-rotated so a rejected draft
can be cut back. The logits are the text model's own: the final soft-capping applied where the
model has it. This module is the :class:`DecodeBackend` facade; drafting is in
:mod:`~app.engine.runtime.backends.mlx.drafting`, prefix reuse in
:mod:`~app.engine.runtime.backends.mlx.conversations`, the trunk's cache moves in
:mod:`~app.engine.runtime.backends.mlx.trunk_caches`.

Rollback: attention KV caches trim by offset; a gated-delta-net ``ArraysCache`` cannot be trimmed.
Its layers are wrapped (:mod:`~app.engine.runtime.backends.mlx.verify_states`) so a verify keeps the
conv window and recurrent state after each token, and a partial accept sets them from the last
accepted one. The arrays are also snapshotted before each verify (mlx arrays are immutable: keeping
the references is the snapshot): with ``per_token_states=False``, or a recurrent layer the wrapper
does not know, rollback restores that snapshot and re-runs the committed tokens — the exact,
portable reference.

Prefix reuse inside a prompt of a recurrent trunk keeps checkpoints at the marks
:func:`prefix_cache.checkpoint_marks` picks (every ``CHECKPOINT_INTERVAL`` = 1024 tokens, where the
last user message starts, one token before the end so a regenerate computes one token; each at
least ``CHECKPOINT_MIN_GAP`` = 64 tokens from the previous, since every mark ends a prefill batch
that reads all weights again, so a regenerate of a short turn recomputes up to 64 tokens in one
batch instead).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llguidance
import mlx.core as mx
import numpy as np
from mlx_lm.models.cache import make_prompt_cache

from app.engine.drafter.facts import DRAFTER_REASON
from app.engine.drafter.pairing import DrafterMatch, choose_drafter, may_take_drafter
from app.engine.errors import RuntimeBackendError
from app.engine.runtime.backends.image_cells import has_images
from app.engine.runtime.backends.mlx import trunk_caches
from app.engine.runtime.backends.mlx.conversations import Conversations
from app.engine.runtime.backends.mlx.drafting import Drafting, HeadDrafter
from app.engine.runtime.backends.mlx.gemma4_drafter import load_drafter
from app.engine.runtime.backends.mlx.gemma4_drafting import Gemma4Drafting, unrotated_caches
from app.engine.runtime.backends.mlx.heads import MtpHead
from app.engine.runtime.backends.mlx.kept_states import Checkpoint, Conversation, KeptStates
from app.engine.runtime.backends.mlx.sidecar import (
    build_head,
    head_style,
    model_type_of,
    read_head_tensors,
)
from app.engine.runtime.backends.mlx.text import HfText
from app.engine.runtime.backends.mlx.verify_states import Capture, wrap_gated_delta_layers
from app.engine.runtime.backends.mlx.vision import MlxVision
from app.engine.runtime.backends.mlx.vision_folder import unavailable_reason
from app.engine.runtime.backends.prefix_cache import (
    CHECKPOINT_INTERVAL,
    ResumePlan,
    checkpoint_marks,
    chunk_ends,
    common_prefix_length,
)
from app.engine.runtime.chat_format.images import ImagePart
from app.engine.runtime.core.backend import (
    DecodeBackend,
    DraftChooser,
    DraftResult,
    LoadSettings,
    ModelInfo,
    PrefixReuse,
    VerifyResult,
)

BACKEND_NAME = "mlx"
DEFAULT_CONTEXT = 4096
PREFILL_CHUNK = 512
MIB = 1024 * 1024


def _load_trunk(folder: Path) -> tuple[Any, Any]:
    import mlx_lm

    try:
        return mlx_lm.load(str(folder))
    except (ValueError, FileNotFoundError, OSError, KeyError) as exc:
        raise RuntimeBackendError(load_failure(folder, exc)) from None


def load_failure(folder: Path, exc: BaseException) -> str:
    """mlx-lm's reason in one line (up to its first colon: "Received 62 parameters not in
    model"), the fix, then mlx-lm's full text (which can list every tensor) on the lines after."""
    full = str(exc).strip()
    reason = full.split(":", 1)[0].splitlines()[0][:160] if full else type(exc).__name__
    return (
        f"mlx-lm could not load {folder.name}: {reason}; the folder needs config.json, the "
        "tokenizer and .safetensors weights of an architecture mlx-lm supports\n"
        f"{folder}\n{full}"
    )


def _open_vision(
    folder: Path, settings: LoadSettings, trunk_model: Any, drafter: Drafting | None
) -> tuple[MlxVision | None, str | None]:
    """The folder's vision tower in mlx-vlm (drafting with the model's own head after a
    picture; a separate drafter does not), or why the model reads no pictures."""
    if not settings.images:
        return None, f"{folder.name} was loaded for text only, so it reads no images"
    reason = unavailable_reason(folder)
    if reason is not None:
        return None, reason
    head = drafter if isinstance(drafter, HeadDrafter) else None
    return MlxVision(folder, trunk_model, head), None


def _hand_over_head_rows(
    drafter: HeadDrafter, vision: MlxVision | None, text: Conversation, from_vision: bool
) -> None:
    """Run the head's queued rows into the conversation they belong to: the picture lane's or
    the text path's, whichever a request just left (the head's queue is shared)."""
    if from_vision and vision is not None:
        vision.settle_head_rows()
    elif not from_vision:
        drafter.keep_matching(text, len(text.tokens))


class MlxBackend(DecodeBackend):
    """One model folder in mlx-lm, with an MTP head when one is found and fits."""

    def __init__(
        self,
        path: Path,
        settings: LoadSettings,
        sidecar: Path | None = None,
        *,
        per_token_states: bool = True,
    ) -> None:
        """``per_token_states`` False keeps the restore + re-run rollback (the reference the
        per-token capture is tested against)."""
        self._path = Path(path)
        model_type = model_type_of(self._path)
        if model_type == "gemma4_assistant":
            raise RuntimeBackendError(
                DRAFTER_REASON.format(name=self._path.name, architecture=model_type)
            )
        drafter_match = self._drafter_for(model_type, settings)
        self._model, tokenizer = _load_trunk(self._path)
        self._text = HfText(tokenizer._tokenizer, set(tokenizer.eos_token_ids))
        self._grammar_tokenizer: llguidance.LLTokenizer | None = None
        text_model = getattr(self._model, "language_model", self._model)
        args = text_model.args
        self._trunk = text_model.model
        if getattr(args, "tie_word_embeddings", False) or "lm_head" not in text_model:
            self._project = self._trunk.embed_tokens.as_linear
        else:
            self._project = text_model.lm_head
        self._softcap = getattr(args, "final_logit_softcapping", None)
        self._drafter, reason, draft_layers = self._open_drafter(
            drafter_match, text_model, model_type, sidecar
        )
        self._vision, images_reason = _open_vision(self._path, settings, self._model, self._drafter)
        self._image_marker = f"<image {secrets.token_hex(8)}>"
        self._in_vision = False
        make_caches = self._cache_maker()
        caches = make_caches()
        self._reusable = all(trunk_caches.is_recurrent(c) or trunk_caches.is_kv(c) for c in caches)
        wrappers = wrap_gated_delta_layers(self._trunk) if per_token_states else []
        recurrent_layers = sum(trunk_caches.is_recurrent(cache) for cache in caches)
        self._capturers = wrappers if len(wrappers) == recurrent_layers else []
        trained = getattr(args, "max_position_embeddings", 0) or DEFAULT_CONTEXT
        self.info = ModelInfo(
            path=self._path,
            backend=BACKEND_NAME,
            architecture=model_type,
            vocab_size=args.vocab_size,
            context_length=settings.context_length or min(DEFAULT_CONTEXT, trained),
            embedding_length=args.hidden_size,
            mtp_layers=draft_layers,
            max_draft_depth=settings.max_draft_depth if self._drafter is not None else 0,
            mtp_unavailable_reason=reason,
            has_chat_template=self._text.chat_template is not None,
            projector=self._path if self._vision is not None else None,
            images_unavailable_reason=images_reason,
            drafter=drafter_match.path if isinstance(self._drafter, Gemma4Drafting) else None,
        )
        self._conversations = Conversations(
            KeptStates(settings.state_cache_mib * MIB),
            make_caches,
            with_head=isinstance(self._drafter, HeadDrafter),
            recurrent=recurrent_layers > 0,
        )
        self.reset()
        self._warm_up()

    def _drafter_for(self, model_type: str, settings: LoadSettings) -> DrafterMatch:
        """The separate drafter folder this model drafts with (checked, one line when it does
        not fit), or none for a model that does not take one."""
        if settings.drafter is None and not may_take_drafter(model_type):
            return DrafterMatch(None)
        return choose_drafter(self._path, settings.drafter)

    def _open_drafter(
        self, match: DrafterMatch, text_model: Any, model_type: str, sidecar: Path | None
    ) -> tuple[Drafting | None, str | None, int]:
        """What drafts (the separate drafter, else the MTP head), why nothing does, and its
        layer count."""
        args = text_model.args
        if match.path is not None:
            try:
                drafter = load_drafter(match.path)
            except RuntimeBackendError as exc:
                return None, f"{exc}; decoding runs without MTP", 0
            layers = len(drafter.model.layers)
            return Gemma4Drafting(drafter, text_model), None, layers
        if may_take_drafter(model_type):
            reason = match.note or (
                f"{self._path.name} drafts with a separate drafter model and no drafter folder "
                "was found beside it, so decoding runs without MTP; pass --drafter FOLDER"
            )
            return None, reason, 0
        head, reason = self._open_head(model_type, sidecar, args.num_hidden_layers)
        if head is None:
            return None, reason, 0
        return HeadDrafter(head), None, 1

    def _cache_maker(self) -> Callable[[], list[Any]]:
        """Fresh trunk caches: mlx-lm's own, with the sliding windows un-rotated when a Gemma 4
        drafter must cut rejected drafts back (see :mod:`.gemma4_drafting`)."""
        if isinstance(self._drafter, Gemma4Drafting):
            return lambda: unrotated_caches(make_prompt_cache(self._model))
        return lambda: make_prompt_cache(self._model)

    def _open_head(
        self, model_type: str, sidecar: Path | None, trunk_layers: int
    ) -> tuple[MtpHead | None, str | None]:
        try:
            style = head_style(model_type)
            self._check_rollback_support()
            tensors = read_head_tensors(self._path, sidecar, style, trunk_layers)
            if tensors is None:
                return None, (
                    f"{self._path.name} has no MTP head: no mtp.safetensors beside it and no MTP "
                    "tensors inside (mlx-lm's converter drops them); pass --sidecar FILE with "
                    "the model's MTP sidecar"
                )
            return build_head(self._model, tensors), None
        except RuntimeBackendError as exc:
            return None, str(exc)

    def _check_rollback_support(self) -> None:
        for cache in make_prompt_cache(self._model):
            if not trunk_caches.is_recurrent(cache) and not (
                hasattr(cache, "trim") and cache.is_trimmable()
            ):
                raise RuntimeBackendError(
                    f"{self._path.name} uses a {type(cache).__name__}, which the MLX backend "
                    "cannot roll back after a rejected draft; decoding runs without MTP"
                )

    def _warm_up(self) -> None:
        """One row through trunk and head so first-use setup does not land in a TTFT."""
        self.prefill([0, 0], with_mtp=self._drafter is not None)
        if self._drafter is not None:
            self.draft(0, 1, lambda _index, _logits: 0)
        self.reset()

    def close(self) -> None:
        self._conversations.close()

    # --- text -------------------------------------------------------------------------------

    def tokenize(self, text: str, *, parse_special: bool) -> list[int]:
        return self._text.tokenize(text, parse_special=parse_special)

    def token_bytes(self, token: int) -> bytes:
        return self._text.token_bytes(token)

    def token_text(self, token: int) -> str:
        return self._text.token_text(token)

    def is_end_of_generation(self, token: int) -> bool:
        return self._text.is_end_of_generation(token)

    def grammar_tokenizer(self) -> llguidance.LLTokenizer:
        if self._grammar_tokenizer is None:
            self._grammar_tokenizer = self._text.grammar_tokenizer(self.info.vocab_size)
        return self._grammar_tokenizer

    @property
    def chat_template(self) -> str | None:
        return self._text.chat_template

    @property
    def special_token_texts(self) -> dict[str, str]:
        return self._text.special_token_texts

    @property
    def bos_token_id(self) -> int | None:
        return self._text.bos_token_id

    @property
    def image_marker(self) -> str | None:
        return self._image_marker if self._vision is not None else None

    def tokenize_with_images(self, text: str, images: Sequence[ImagePart]) -> list[int]:
        if self._vision is None:
            return super().tokenize_with_images(text, images)
        cells = self._vision.tokens(text, self._image_marker, images)
        bos = self.bos_token_id
        return [bos, *cells] if bos is not None and cells[:1] != [bos] else cells

    def plain_only_reason(self, tokens: Sequence[int]) -> str | None:
        return self._vision.plain_only_reason(tokens) if self._vision is not None else None

    # --- decoding ---------------------------------------------------------------------------

    @property
    def _live(self) -> Conversation:
        return self._conversations.live

    @property
    def _lane(self) -> MlxVision | None:
        """The picture lane while it holds the request (:mod:`.vision`)."""
        return self._vision if self._in_vision else None

    @property
    def committed_length(self) -> int:
        return self._lane.length if self._lane else len(self._live.tokens)

    @property
    def last_prefix_reuse(self) -> PrefixReuse:
        return self._lane.last_reuse if self._lane else self._last_reuse

    @property
    def kept_state_bytes(self) -> int:
        return self._conversations.kept.nbytes

    def reset(self) -> None:
        self._in_vision = False
        if self._vision is not None:
            self._vision.reset()
        self._conversations.reset()
        self._head_tracking = False
        if self._drafter is not None:
            self._drafter.clear()
        self._verified: _Verified | None = None
        self._last_reuse = PrefixReuse()

    def prefill(
        self, tokens: Sequence[int], *, with_mtp: bool, keep_at: Sequence[int] = ()
    ) -> np.ndarray:
        if with_mtp and self._drafter is None:
            raise RuntimeBackendError(
                f"{self._path.name} has no usable MTP head: {self.info.mtp_unavailable_reason}"
            )
        tokens = list(tokens)
        if not tokens:
            raise RuntimeBackendError("the prompt is empty: there is nothing to prefill")
        if len(tokens) > self.info.context_length:
            raise RuntimeBackendError(
                f"the prompt is {len(tokens)} tokens but the context window of "
                f"{self._path.name} is {self.info.context_length} tokens; shorten the prompt or "
                "load the model with a larger context (--ctx)"
            )
        was_vision, self._in_vision = self._in_vision, has_images(tokens)
        if was_vision != self._in_vision and isinstance(self._drafter, HeadDrafter):
            _hand_over_head_rows(self._drafter, self._vision, self._live, was_vision)
        if self._in_vision:  # a prompt with pictures: through mlx-vlm (:mod:`.vision`)
            if self._vision is None:
                raise RuntimeBackendError(self.info.images_unavailable_reason or "no images here")
            return self._vision.prefill(tokens, with_mtp)
        conversations = self._conversations
        if not self._reusable:
            conversations.live = conversations.new()
        try:
            self._settle(tokens)
            plan = conversations.plan(tokens, with_mtp)
            conversations.adopt(plan, tokens)
            logits = self._run_prompt(tokens, plan, with_mtp, keep_at)
        except BaseException:
            conversations.drop_live()
            raise
        self._last_reuse = PrefixReuse(plan.position, len(tokens) - plan.position, plan.source)
        return logits

    def _settle(self, tokens: list[int]) -> None:
        """Close the previous request: run the head rows still queued that the new prompt keeps,
        and keep a checkpoint at the end of its reply when the new prompt reaches it."""
        live = self._live
        self._verified = None
        shared = common_prefix_length(live.tokens, tokens)
        if self._drafter is not None:
            self._drafter.keep_matching(live, shared)
        self._head_tracking = False
        self._conversations.settle(shared, len(tokens))

    def _run_prompt(
        self, tokens: list[int], plan: ResumePlan, with_mtp: bool, keep_at: Sequence[int]
    ) -> np.ndarray:
        """Compute ``tokens`` from the resume point on: trunk, head rows with ``with_mtp``, and
        for a recurrent trunk checkpoints at the marks :func:`checkpoint_marks` picks (interval
        marks, ``keep_at``, before the last token; at least its minimum gap apart)."""
        start = plan.position
        conversations = self._conversations
        marks = (
            checkpoint_marks(start, len(tokens), wanted=keep_at, interval=CHECKPOINT_INTERVAL)
            if conversations.recurrent
            else []
        )
        live = self._live
        previous = plan.option.state.hidden if plan.option is not None else None
        drafter = self._drafter if with_mtp else None
        if drafter is not None:
            drafter.resume(live, start if previous is None else start - 1)
        assert live.tokens == tokens[:start], "resume state out of step with its tokens"
        hidden = None
        ends = chunk_ends(start, len(tokens), marks, PREFILL_CHUNK)
        for first, end in zip([start, *ends[:-1]], ends, strict=True):
            chunk = tokens[first:end]
            hidden = self._trunk(mx.array([chunk]), cache=live.trunk)[0]
            evaluate = [hidden, trunk_caches.cache_state(live.trunk)]
            if drafter is not None:
                if previous is None:
                    row_tokens, rows_hidden = chunk[1:], hidden[:-1]
                else:
                    row_tokens = chunk
                    rows_hidden = mx.concatenate([previous[None], hidden[:-1]])
                if row_tokens:
                    drafter.prompt_rows(row_tokens, rows_hidden[None], live)
                evaluate.extend(drafter.arrays(live))
            previous = hidden[-1]
            mx.eval(evaluate)
            live.tokens.extend(chunk)
            if end in marks:
                arrays = trunk_caches.recurrent_arrays(live.trunk)
                conversations.kept.add_checkpoint(live.ident, Checkpoint(end, arrays, hidden[-1]))
        assert hidden is not None
        live.hidden_last = hidden[-1]
        self._head_tracking = with_mtp
        return self._logits_rows(hidden[-1:])[0]

    def step(self, token: int) -> np.ndarray:
        if lane := self._lane:
            self.info.require_room(lane.length, 1)
            return lane.step(token)
        live = self._live
        self.info.require_room(len(live.tokens), 1)
        hidden = self._trunk(mx.array([[token]]), cache=live.trunk)[0]
        if self._head_tracking:
            self._drafter.commit_row(token, live.hidden_last)
        live.tokens.append(token)
        live.hidden_last = hidden[-1]
        return self._logits_rows(hidden)[0]

    def draft(self, last_token: int, depth: int, choose: DraftChooser) -> DraftResult:
        if lane := self._lane:
            return lane.draft(last_token, depth, choose)
        if self._drafter is None or not self._head_tracking:
            raise RuntimeBackendError("drafting needs a prefill with the MTP head first")
        live = self._live
        return self._drafter.draft(live, last_token, live.hidden_last, depth, choose)

    def verify(self, tokens: Sequence[int]) -> VerifyResult:
        if lane := self._lane:
            self.info.require_room(lane.length, len(tokens))
            return lane.verify(tokens)
        live = self._live
        self.info.require_room(len(live.tokens), len(tokens))
        snapshot = trunk_caches.snapshot(live.trunk)
        capture = Capture() if self._capturers and len(tokens) > 1 else None
        for wrapper in self._capturers:
            wrapper.capture = capture
        try:
            hidden = self._trunk(mx.array([list(tokens)]), cache=live.trunk)[0]
        finally:
            for wrapper in self._capturers:
                wrapper.capture = None
        if capture is not None:
            mx.eval(hidden, capture.arrays())
        logits = self._logits_rows(hidden)
        hidden_before = live.hidden_last
        assert hidden_before is not None
        start = len(live.tokens)
        self._verified = _Verified(start, tuple(tokens), hidden, hidden_before, snapshot, capture)
        live.tokens.extend(tokens)
        return VerifyResult(logits, np.array(hidden.astype(mx.float32)))

    def rollback(self, committed_length: int) -> None:
        if lane := self._lane:
            return lane.rollback(committed_length)
        if self._verified is None:
            raise RuntimeBackendError(
                "rollback without a verify: the decoding loop is out of order"
            )
        verified, self._verified = self._verified, None
        start, tokens, hidden = verified.start, verified.tokens, verified.hidden
        accepted = committed_length - start - 1
        if not 0 <= accepted < len(tokens):
            raise RuntimeBackendError(
                f"cannot commit {committed_length} tokens after verifying positions "
                f"{start}..{start + len(tokens) - 1}"
            )
        live = self._live
        del live.tokens[committed_length:]
        if committed_length < start + len(tokens) and verified.capture is not None:
            dropped = len(tokens) - accepted - 1
            trunk_caches.keep_captured(live.trunk, verified.capture, accepted, dropped)
        elif committed_length < start + len(tokens):
            trunk_caches.restore(live.trunk, verified.snapshot, start)
            self._trunk(mx.array([list(tokens[: accepted + 1])]), cache=live.trunk)
            mx.eval(trunk_caches.cache_state(live.trunk))
        if self._drafter is not None:
            self._drafter.commit_rows(
                live, start, tokens[: accepted + 1], verified.hidden_before, hidden
            )
        live.hidden_last = hidden[accepted]
        recurrent = tuple(tuple(s) for s in verified.snapshot if isinstance(s, list))
        self._conversations.last_verify = Checkpoint(start, recurrent, verified.hidden_before)

    def _logits_rows(self, hidden: mx.array) -> np.ndarray:
        logits = self._project(hidden)
        if self._softcap:
            logits = mx.tanh(logits / self._softcap) * self._softcap
        return np.array(logits.astype(mx.float32))


@dataclass(frozen=True)
class _Verified:
    """What :meth:`MlxBackend.rollback` needs from the last verify: where it started, its
    tokens, their hidden states, h_{start−1}, the state before it and, when captured, the
    recurrent states after each of its tokens."""

    start: int
    tokens: tuple[int, ...]
    hidden: mx.array
    hidden_before: mx.array
    snapshot: list[Any]
    capture: Capture | None
