"""The MLX backend: a model folder loaded with stock mlx-lm, plus an MTP head built here.

The trunk is whatever ``mlx_lm.load`` gives (4-bit, 8-bit, BF16; Metal on Apple silicon, CPU on
Linux). Its inner model returns post-norm hidden states, which is what the head consumes, so the
trunk runs unpatched: hidden = ``model.model(tokens, cache)``, logits = its ``lm_head`` (or the tied
embedding). The head (:mod:`~app.engine.runtime.backends.mlx.heads`) comes from a sidecar or the
folder's own ``mtp.*`` tensors (:mod:`~app.engine.runtime.backends.mlx.sidecar`); when there is
none, or it does not fit, the model decodes plainly and ``ModelInfo.mtp_unavailable_reason`` says
why.

Rollback: attention KV caches trim by offset; a gated-delta-net ``ArraysCache`` cannot be trimmed.
Its layers are wrapped (:mod:`~app.engine.runtime.backends.mlx.verify_states`) so a verify keeps the
conv window and recurrent state after each token, and a partial accept sets them from the last
accepted one. The arrays are also snapshotted before each verify (mlx arrays are immutable: keeping
the references is the snapshot): with ``per_token_states=False``, or a recurrent layer the wrapper
does not know, rollback restores that snapshot and re-runs the committed tokens — the exact,
portable reference.

Head rows follow the llama.cpp backend's convention: the row for position p carries token x_p
and the trunk's hidden state h_{p−1}. Rows for tokens a verify commits (or a plain step after a
prefill with the head) are queued and run with the next cycle's first draft row.

Prefix reuse: the live conversation keeps the tokens its caches stand for; a prefill resumes at the
longest usable prefix of the live state, a checkpoint or a saved conversation
(:mod:`~app.engine.runtime.backends.mlx.kept_states`) and computes only the rest. A trunk with
recurrent layers resumes only at a checkpoint: the marks :func:`prefix_cache.checkpoint_marks` picks
inside a prompt (every ``CHECKPOINT_INTERVAL`` = 1024 tokens, where the last user message starts,
one token before the end so a regenerate computes one token; each at least ``CHECKPOINT_MIN_GAP`` =
64 tokens from the previous, since every mark ends a prefill batch that reads all weights again, so
a regenerate of a short turn recomputes up to 64 tokens in one batch instead), the end of each reply
as the next prefill finds it, and the state before the last verify when a prompt diverges inside it.
An attention-only trunk resumes anywhere. The head resumes with the trunk: each checkpoint keeps
h_{s−1}, so after trimming the head to rows 1..s−1 the first computed row (x_s, h_{s−1}) is exact.
That costs one hidden vector per checkpoint; the alternative (resuming the trunk one token earlier
to recompute h_{s−1}) needs a recurrent state one token before every checkpoint, which would double
them. An attention-only trunk does take that route where no hidden is kept: it resumes at s with the
head holding rows 1..s, so the first computed token's hidden feeds row s+1. A head left behind the
trunk (requests without MTP do not run it) is not caught up: the prefill resumes from the latest
point the head still covers, exact at the cost of the trunk recompute.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llguidance
import mlx.core as mx
import numpy as np

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.backends.mlx.heads import MtpHead
from app.engine.runtime.backends.mlx.kept_states import (
    Checkpoint,
    Conversation,
    KeptStates,
    cache_arrays,
)
from app.engine.runtime.backends.mlx.sidecar import (
    build_head,
    head_style,
    model_type_of,
    read_head_tensors,
)
from app.engine.runtime.backends.mlx.text import HfText
from app.engine.runtime.backends.mlx.verify_states import Capture, wrap_gated_delta_layers
from app.engine.runtime.backends.prefix_cache import (
    CHECKPOINT_INTERVAL,
    SAVE_MIN_TOKENS,
    checkpoint_marks,
    chunk_ends,
)
from app.engine.runtime.backends.prefix_cache import common_prefix_length as common_prefix
from app.engine.runtime.core.backend import (
    STOP_DRAFTING,
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
        from mlx_lm.models.cache import ArraysCache, KVCache, make_prompt_cache

        self._arrays_cache_type = ArraysCache
        self._kv_cache_type = KVCache
        self._make_cache = make_prompt_cache
        self._kept = KeptStates(settings.state_cache_mib * MIB)
        self._serial = 0
        self._path = Path(path)
        model_type = model_type_of(self._path)
        self._model, tokenizer = _load_trunk(self._path)
        self._text = HfText(tokenizer._tokenizer, set(tokenizer.eos_token_ids))
        self._grammar_tokenizer: llguidance.LLTokenizer | None = None
        text_model = getattr(self._model, "language_model", self._model)
        args = text_model.args
        self._trunk = self._model.model
        if getattr(args, "tie_word_embeddings", False) or "lm_head" not in text_model:
            self._project = self._trunk.embed_tokens.as_linear
        else:
            self._project = text_model.lm_head
        self._head, reason = self._open_head(model_type, sidecar, args.num_hidden_layers)
        caches = self._make_cache(self._model)
        self._recurrent = any(isinstance(cache, ArraysCache) for cache in caches)
        self._reusable = all(isinstance(cache, (ArraysCache, KVCache)) for cache in caches)
        wrappers = wrap_gated_delta_layers(self._trunk) if per_token_states else []
        recurrent_layers = sum(isinstance(cache, ArraysCache) for cache in caches)
        self._capturers = wrappers if len(wrappers) == recurrent_layers else []
        trained = getattr(args, "max_position_embeddings", 0) or DEFAULT_CONTEXT
        self.info = ModelInfo(
            path=self._path,
            backend=BACKEND_NAME,
            architecture=model_type,
            vocab_size=args.vocab_size,
            context_length=settings.context_length or min(DEFAULT_CONTEXT, trained),
            embedding_length=args.hidden_size,
            mtp_layers=1 if self._head is not None else 0,
            max_draft_depth=settings.max_draft_depth if self._head is not None else 0,
            mtp_unavailable_reason=reason,
            has_chat_template=self._text.chat_template is not None,
        )
        self.reset()
        self._warm_up()

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
        for cache in self._make_cache(self._model):
            if not isinstance(cache, self._arrays_cache_type) and not (
                hasattr(cache, "trim") and cache.is_trimmable()
            ):
                raise RuntimeBackendError(
                    f"{self._path.name} uses a {type(cache).__name__}, which the MLX backend "
                    "cannot roll back after a rejected draft; decoding runs without MTP"
                )

    def _warm_up(self) -> None:
        """One row through trunk and head so first-use setup does not land in a TTFT."""
        self.prefill([0, 0], with_mtp=self._head is not None)
        if self._head is not None:
            self.draft(0, 1, lambda _index, _logits: 0)
        self.reset()

    def close(self) -> None:
        self._kept.clear()
        self._live = Conversation(0, [], [], None)
        self._last_verify = None

    # --- text -------------------------------------------------------------------------------

    def tokenize(self, text: str, *, parse_special: bool) -> list[int]:
        return self._text.tokenize(text, parse_special=parse_special)

    def token_bytes(self, token: int) -> bytes:
        return self._text.token_bytes(token)

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

    # --- decoding ---------------------------------------------------------------------------

    @property
    def committed_length(self) -> int:
        return len(self._live.tokens)

    @property
    def last_prefix_reuse(self) -> PrefixReuse:
        return self._last_reuse

    @property
    def kept_state_bytes(self) -> int:
        return self._kept.nbytes

    def reset(self) -> None:
        self._kept.clear()
        self._live = self._new_conversation()
        self._head_tracking = False
        self._queue_tokens: list[int] = []
        self._queue_hidden: list[mx.array] = []
        self._verified: _Verified | None = None
        self._last_verify: Checkpoint | None = None
        self._last_reuse = PrefixReuse()

    def prefill(
        self, tokens: Sequence[int], *, with_mtp: bool, keep_at: Sequence[int] = ()
    ) -> np.ndarray:
        if with_mtp and self._head is None:
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
        if not self._reusable:
            self._live = self._new_conversation()
        try:
            self._settle_live(tokens)
            resume = self._best_resume(tokens, with_mtp)
            self._adopt(resume, tokens)
            logits = self._run_prompt(tokens, resume, with_mtp, keep_at)
        except BaseException:
            # a half-run prompt leaves caches that no token list describes: start afresh
            self._kept.forget(self._live.ident)
            self._live = self._new_conversation()
            raise
        self._last_reuse = PrefixReuse(
            resume.position, len(tokens) - resume.position, resume.source
        )
        return logits

    def step(self, token: int) -> np.ndarray:
        self._check_room(1)
        hidden = self._trunk(mx.array([[token]]), cache=self._live.trunk)[0]
        if self._head_tracking:
            self._queue_tokens.append(token)
            self._queue_hidden.append(self._live.hidden_last)
        self._live.tokens.append(token)
        self._live.hidden_last = hidden[-1]
        return self._logits_rows(hidden)[0]

    def draft(self, last_token: int, depth: int, choose: DraftChooser) -> DraftResult:
        if self._head is None or not self._head_tracking:
            raise RuntimeBackendError("drafting needs a prefill with the MTP head first")
        head_cache = self._live.head
        if depth == 0:
            self._flush_queue()
            return DraftResult((), np.zeros((0, self.info.vocab_size), dtype=np.float32))
        tokens = [*self._queue_tokens, last_token]
        hidden = mx.stack([*self._queue_hidden, self._live.hidden_last])[None]
        self._queue_tokens, self._queue_hidden = [], []
        drafts: list[int] = []
        rows = np.empty((depth, self.info.vocab_size), dtype=np.float32)
        for index in range(depth):
            carried, logits = self._head.step(mx.array([tokens]), hidden, head_cache)
            rows[index] = np.array(logits[0, -1].astype(mx.float32))
            token = choose(index, rows[index])
            if token == STOP_DRAFTING:
                break
            drafts.append(token)
            tokens, hidden = [token], carried[:, -1:, :]
        # keep the row of ``last_token`` (committed by the verify), drop the drafts' rows
        head_cache.trim(head_cache.offset - len(self._live.tokens))
        return DraftResult(tuple(drafts), rows[: len(drafts)])

    def verify(self, tokens: Sequence[int]) -> VerifyResult:
        self._check_room(len(tokens))
        snapshot = self._snapshot()
        capture = Capture() if self._capturers and len(tokens) > 1 else None
        for wrapper in self._capturers:
            wrapper.capture = capture
        try:
            hidden = self._trunk(mx.array([list(tokens)]), cache=self._live.trunk)[0]
        finally:
            for wrapper in self._capturers:
                wrapper.capture = None
        if capture is not None:
            mx.eval(hidden, capture.arrays())
        logits = self._logits_rows(hidden)
        hidden_before = self._live.hidden_last
        assert hidden_before is not None
        start = len(self._live.tokens)
        self._verified = _Verified(start, tuple(tokens), hidden, hidden_before, snapshot, capture)
        self._live.tokens.extend(tokens)
        return VerifyResult(logits, np.array(hidden.astype(mx.float32)))

    def rollback(self, committed_length: int) -> None:
        if self._verified is None:
            raise RuntimeBackendError(
                "rollback without a verify: the decoding loop is out of order"
            )
        verified, self._verified = self._verified, None
        start, tokens, hidden = verified.start, verified.tokens, verified.hidden
        hidden_before, snapshot = verified.hidden_before, verified.snapshot
        accepted = committed_length - start - 1
        if not 0 <= accepted < len(tokens):
            raise RuntimeBackendError(
                f"cannot commit {committed_length} tokens after verifying positions "
                f"{start}..{start + len(tokens) - 1}"
            )
        del self._live.tokens[committed_length:]
        if committed_length < start + len(tokens) and verified.capture is not None:
            self._keep_captured(verified.capture, accepted, len(tokens) - accepted - 1)
        elif committed_length < start + len(tokens):
            self._restore(snapshot, start)
            self._trunk(mx.array([list(tokens[: accepted + 1])]), cache=self._live.trunk)
            mx.eval(self._cache_state())
        head_next = (self._live.head.offset + 1 if self._live.head is not None else 0) + len(
            self._queue_tokens
        )
        for position in range(max(head_next, start), committed_length):
            offset = position - start
            self._queue_tokens.append(tokens[offset])
            self._queue_hidden.append(hidden_before if offset == 0 else hidden[offset - 1])
        self._live.hidden_last = hidden[accepted]
        self._last_verify = Checkpoint(
            start, tuple(tuple(s) for s in snapshot if isinstance(s, list)), hidden_before
        )

    # --- prefix reuse -----------------------------------------------------------------------

    def _new_conversation(self) -> Conversation:
        self._serial += 1
        head = self._kv_cache_type() if self._head is not None else None
        return Conversation(self._serial, [], self._make_cache(self._model), head)

    def _settle_live(self, tokens: list[int]) -> None:
        """Close the previous request: run the head rows still queued that the new prompt keeps,
        and keep a checkpoint at the end of its reply when the new prompt reaches it."""
        live = self._live
        self._verified = None
        shared = common_prefix(live.tokens, tokens)
        if self._queue_tokens:
            valid = max(0, min(len(self._queue_tokens), shared - live.head.offset - 1))
            del self._queue_tokens[valid:], self._queue_hidden[valid:]
            self._flush_queue()
        self._head_tracking = False
        if self._recurrent:
            limit = min(shared, len(tokens) - 1)
            end = Checkpoint(len(live.tokens), self._recurrent_arrays(live.trunk), live.hidden_last)
            for candidate in (end, self._last_verify):
                if candidate is not None and 0 < candidate.position <= limit:
                    self._kept.add_checkpoint(live.ident, candidate)
                    break
        self._last_verify = None

    def _best_resume(self, tokens: list[int], with_mtp: bool) -> _Resume:
        """The kept state that leaves the fewest prompt tokens to compute (the live one on a
        tie); with ``with_mtp`` only where the head's cache covers the rows before it."""
        best = _Resume(self._live, 0, None, "", common_prefix(self._live.tokens, tokens))
        for conversation in [self._live, *self._kept.saved()]:
            shared = common_prefix(conversation.tokens, tokens)
            head_rows = _head_rows(conversation, shared)
            limit = min(shared, len(tokens) - 1)
            for checkpoint in self._resume_points(conversation, limit, head_rows):
                position = checkpoint.position
                needed = position if checkpoint.hidden is None else position - 1
                if position <= best.position or (with_mtp and head_rows < needed):
                    continue
                if conversation is not self._live:
                    source = "saved"
                elif position == len(conversation.tokens):
                    source = "live"
                else:
                    source = "checkpoint" if self._recurrent else "trimmed"
                best = _Resume(conversation, position, checkpoint, source, shared)
        return best

    def _resume_points(
        self, conversation: Conversation, limit: int, head_rows: int
    ) -> list[Checkpoint]:
        """Where ``conversation`` can resume, at positions 1..``limit``: its checkpoints and its
        end; an attention-only trunk also at ``limit`` itself and where its head's rows end
        (without a hidden state: the head then needs its row for that position)."""
        end = len(conversation.tokens)
        points = []
        if not self._recurrent:
            points = [Checkpoint(limit, (), None), Checkpoint(min(limit, head_rows), (), None)]
        points += [c for c in self._kept.checkpoints(conversation.ident) if c.position <= limit]
        if end <= limit and conversation.hidden_last is not None:
            arrays = self._recurrent_arrays(conversation.trunk)
            points.append(Checkpoint(end, arrays, conversation.hidden_last))
        return [point for point in points if point.position > 0]

    def _adopt(self, resume: _Resume, tokens: list[int]) -> None:
        """Make ``resume``'s conversation live, cut to its resume point. A conversation that
        would lose a long stretch the new prompt does not repeat (another conversation, an edit
        far back) is saved whole first and the prompt continues a copy of its kept prefix."""
        chosen, position = resume.conversation, resume.position
        if chosen is not self._live:
            live = self._live
            if _worth_keeping(live, common_prefix(live.tokens, tokens), len(tokens)):
                self._kept.save(live)
            else:
                self._kept.forget(live.ident)
            self._kept.take(chosen.ident)
            self._live = chosen
        if _worth_keeping(chosen, resume.shared, len(tokens)):
            self._live = self._fork(chosen, position, resume.shared)
            self._kept.save(chosen)
        else:
            self._kept.forget_checkpoints_after(chosen.ident, resume.shared)
            del chosen.tokens[position:]
            for cache in chosen.trunk:
                if isinstance(cache, self._kv_cache_type):
                    cache.trim(cache.offset - position)
            if chosen.head is not None:
                valid = _head_rows(chosen, resume.shared)
                chosen.head.trim(chosen.head.offset - valid)
        recurrent = iter(resume.checkpoint.recurrent if resume.checkpoint is not None else ())
        for cache in self._live.trunk:
            if isinstance(cache, self._arrays_cache_type):
                saved = next(recurrent, None)
                cache.cache = list(saved) if saved is not None else [None] * len(cache.cache)
        self._kept.touch(chosen.ident, position)

    def _fork(self, source: Conversation, position: int, shared: int) -> Conversation:
        """A new conversation holding the first ``position`` tokens of ``source`` (KV slices: new
        arrays, so ``source`` stays intact); recurrent arrays are set from the checkpoint."""
        fork = self._new_conversation()
        fork.tokens = source.tokens[:position]
        for kept, new in zip(source.trunk, fork.trunk, strict=True):
            if isinstance(kept, self._kv_cache_type) and position > 0:
                _copy_kv(kept, new, position)
        if source.head is not None and fork.head is not None:
            rows = _head_rows(source, shared)
            if rows > 0:
                _copy_kv(source.head, fork.head, rows)
        self._kept.share_checkpoints(source.ident, fork.ident, shared)
        return fork

    def _run_prompt(
        self, tokens: list[int], resume: _Resume, with_mtp: bool, keep_at: Sequence[int]
    ) -> np.ndarray:
        """Compute ``tokens`` from the resume point on: trunk, head rows with ``with_mtp``, and
        for a recurrent trunk checkpoints at the marks :func:`checkpoint_marks` picks (interval
        marks, ``keep_at``, before the last token; at least its minimum gap apart)."""
        start = resume.position
        marks = (
            checkpoint_marks(start, len(tokens), wanted=keep_at, interval=CHECKPOINT_INTERVAL)
            if self._recurrent
            else []
        )
        live = self._live
        previous = resume.checkpoint.hidden if resume.checkpoint is not None else None
        head = live.head
        if with_mtp:
            assert head is not None and self._head is not None
            needed = start if previous is None else start - 1
            head.trim(head.offset - needed)
        assert live.tokens == tokens[:start], "resume state out of step with its tokens"
        hidden = None
        ends = chunk_ends(start, len(tokens), marks, PREFILL_CHUNK)
        for first, end in zip([start, *ends[:-1]], ends, strict=True):
            chunk = tokens[first:end]
            hidden = self._trunk(mx.array([chunk]), cache=live.trunk)[0]
            evaluate = [hidden, self._cache_state()]
            if with_mtp:
                if previous is None:
                    row_tokens, rows_hidden = chunk[1:], hidden[:-1]
                else:
                    row_tokens = chunk
                    rows_hidden = mx.concatenate([previous[None], hidden[:-1]])
                if row_tokens:
                    self._head.step(mx.array([row_tokens]), rows_hidden[None], head)
                evaluate.append(head.state)
            previous = hidden[-1]
            mx.eval(evaluate)
            live.tokens.extend(chunk)
            if end in marks:
                arrays = self._recurrent_arrays(live.trunk)
                self._kept.add_checkpoint(live.ident, Checkpoint(end, arrays, hidden[-1]))
        assert hidden is not None
        live.hidden_last = hidden[-1]
        self._head_tracking = with_mtp
        return self._logits_rows(hidden[-1:])[0]

    # --- helpers ----------------------------------------------------------------------------

    def _flush_queue(self) -> None:
        if self._queue_tokens:
            self._head.step(
                mx.array([self._queue_tokens]),
                mx.stack(self._queue_hidden)[None],
                self._live.head,
            )
            mx.eval(self._live.head.state)
            self._queue_tokens, self._queue_hidden = [], []

    def _recurrent_arrays(self, trunk: list[Any]) -> tuple[tuple[mx.array | None, ...], ...]:
        return tuple(
            tuple(cache.cache) for cache in trunk if isinstance(cache, self._arrays_cache_type)
        )

    def _snapshot(self) -> list[Any]:
        """Per trunk cache: its arrays (recurrent state) or its offset (KV)."""
        return [
            list(cache.cache) if isinstance(cache, self._arrays_cache_type) else cache.offset
            for cache in self._live.trunk
        ]

    def _keep_captured(self, capture: Capture, accepted: int, dropped: int) -> None:
        """The trunk as after the first ``accepted`` + 1 verified tokens: each recurrent layer
        from its captured state, each KV cache trimmed."""
        layers = iter(capture.layers)
        for cache in self._live.trunk:
            if isinstance(cache, self._arrays_cache_type):
                cache.cache = list(next(layers)[accepted])
            else:
                cache.trim(dropped)

    def _restore(self, snapshot: list[Any], length: int) -> None:
        for cache, saved in zip(self._live.trunk, snapshot, strict=True):
            if isinstance(cache, self._arrays_cache_type):
                cache.cache = list(saved)
            else:
                cache.trim(cache.offset - saved)
        assert all(saved == length for saved in snapshot if isinstance(saved, int)), (
            "KV cache offsets out of step with the committed length"
        )

    def _cache_state(self) -> list[mx.array]:
        return [
            array
            for cache in self._live.trunk
            for array in (
                cache.cache if isinstance(cache, self._arrays_cache_type) else cache_arrays(cache)
            )
            if array is not None
        ]

    def _logits_rows(self, hidden: mx.array) -> np.ndarray:
        return np.array(self._project(hidden).astype(mx.float32))

    def _check_room(self, count: int) -> None:
        if self.committed_length + count > self.info.context_length:
            raise RuntimeBackendError(
                f"the context window of {self._path.name} ({self.info.context_length} tokens) is "
                "full; start a new conversation or load the model with a larger context (--ctx)"
            )


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


@dataclass(frozen=True)
class _Resume:
    """Where a prefill starts: ``position`` tokens of ``conversation`` kept (0: none), with the
    recurrent arrays and h_{position−1} of ``checkpoint``; ``shared`` is how many leading tokens
    the conversation and the prompt have in common."""

    conversation: Conversation
    position: int
    checkpoint: Checkpoint | None
    source: str
    shared: int


def _head_rows(conversation: Conversation, shared: int) -> int:
    """Head rows still right for a prompt sharing ``shared`` tokens: row p needs x_0..x_p."""
    if conversation.head is None:
        return 0
    return min(conversation.head.offset, max(shared - 1, 0))


def _worth_keeping(conversation: Conversation, shared: int, prompt_length: int) -> bool:
    """True when a prompt would drop a long stretch of ``conversation`` that it does not repeat
    (not a regenerate, where the prompt is a prefix of it)."""
    length = len(conversation.tokens)
    return shared < min(prompt_length, length) and length - shared >= SAVE_MIN_TOKENS


def _copy_kv(source: Any, target: Any, length: int) -> None:
    """``target`` (an empty mlx-lm ``KVCache``) holds the first ``length`` rows of ``source`` in
    new arrays: KVCache writes into its buffers in place, so the two must not share them."""
    target.keys = source.keys[..., :length, :]
    target.values = source.values[..., :length, :]
    target.offset = length
