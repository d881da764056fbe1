"""The MLX backend: a model folder loaded with stock mlx-lm, plus an MTP head built here.

The trunk is whatever ``mlx_lm.load`` gives (4-bit, 8-bit, BF16; Metal on Apple silicon, CPU on
Linux). Its inner model returns post-norm hidden states, which is what the head consumes, so the
trunk runs unpatched: hidden = ``model.model(tokens, cache)``, logits = its ``lm_head`` (or the
tied embedding). The head (:mod:`mlx_heads`) comes from a sidecar or the folder's own ``mtp.*``
tensors (:mod:`mlx_sidecar`); when there is none, or it does not fit, the model decodes plainly
and ``ModelInfo.mtp_unavailable_reason`` says why.

Rollback: attention KV caches trim by offset; a gated-delta-net ``ArraysCache`` cannot be
trimmed, so its arrays are snapshotted before each verify (mlx arrays are immutable: keeping the
references is the snapshot) and, after a partial accept, restored and the committed tokens
re-run — exact and portable; capturing per-token states inside verify would save that re-run.

Head rows follow the llama.cpp backend's convention: the row for position p carries token x_p
and the trunk's hidden state h_{p−1}. Rows for tokens a verify commits are queued and run with
the next cycle's first draft row.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.backend import (
    DecodeBackend,
    DraftChooser,
    DraftResult,
    LoadSettings,
    ModelInfo,
    VerifyResult,
)
from app.engine.runtime.mlx_heads import MtpHead
from app.engine.runtime.mlx_sidecar import (
    build_head,
    head_style,
    model_type_of,
    read_head_tensors,
)
from app.engine.runtime.mlx_text import HfText

BACKEND_NAME = "mlx"
DEFAULT_CONTEXT = 4096
PREFILL_CHUNK = 512


def _load_trunk(folder: Path) -> tuple[Any, Any]:
    import mlx_lm

    try:
        return mlx_lm.load(str(folder))
    except (ValueError, FileNotFoundError, OSError, KeyError) as exc:
        raise RuntimeBackendError(
            f"mlx-lm could not load {folder} ({exc}); the folder needs config.json, the "
            "tokenizer and .safetensors weights of an architecture mlx-lm supports"
        ) from None


class MlxBackend(DecodeBackend):
    """One model folder in mlx-lm, with an MTP head when one is found and fits."""

    def __init__(self, path: Path, settings: LoadSettings, sidecar: Path | None = None) -> None:
        from mlx_lm.models.cache import ArraysCache, KVCache, make_prompt_cache

        self._arrays_cache_type = ArraysCache
        self._kv_cache_type = KVCache
        self._make_cache = make_prompt_cache
        self._path = Path(path)
        model_type = model_type_of(self._path)
        self._model, tokenizer = _load_trunk(self._path)
        self._text = HfText(tokenizer._tokenizer, set(tokenizer.eos_token_ids))
        text_model = getattr(self._model, "language_model", self._model)
        args = text_model.args
        self._trunk = self._model.model
        if getattr(args, "tie_word_embeddings", False) or "lm_head" not in text_model:
            self._project = self._trunk.embed_tokens.as_linear
        else:
            self._project = text_model.lm_head
        self._head, reason = self._open_head(model_type, sidecar, args.num_hidden_layers)
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
        self._cache = []
        self._head_cache = None

    # --- text -------------------------------------------------------------------------------

    def tokenize(self, text: str, *, parse_special: bool) -> list[int]:
        return self._text.tokenize(text, parse_special=parse_special)

    def token_bytes(self, token: int) -> bytes:
        return self._text.token_bytes(token)

    def is_end_of_generation(self, token: int) -> bool:
        return self._text.is_end_of_generation(token)

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
        return self._n_past

    def reset(self) -> None:
        self._cache = self._make_cache(self._model)
        self._head_cache = self._kv_cache_type() if self._head is not None else None
        self._n_past = 0
        self._head_next = 1
        self._queue_tokens: list[int] = []
        self._queue_hidden: list[mx.array] = []
        self._hidden_last: mx.array | None = None
        self._verified: tuple[int, tuple[int, ...], mx.array, mx.array, list[Any]] | None = None

    def prefill(self, tokens: Sequence[int], *, with_mtp: bool) -> np.ndarray:
        if with_mtp and self._head is None:
            raise RuntimeBackendError(
                f"{self._path.name} has no usable MTP head: {self.info.mtp_unavailable_reason}"
            )
        self.reset()
        self._check_room(len(tokens))
        previous: mx.array | None = None
        hidden = None
        for start in range(0, len(tokens), PREFILL_CHUNK):
            chunk = list(tokens[start : start + PREFILL_CHUNK])
            hidden = self._trunk(mx.array([chunk]), cache=self._cache)[0]
            if with_mtp:
                rows_hidden = (
                    hidden[:-1]
                    if previous is None
                    else mx.concatenate([previous[None], hidden[:-1]])
                )
                row_tokens = chunk[1:] if previous is None else chunk
                if row_tokens:
                    self._head.step(mx.array([row_tokens]), rows_hidden[None], self._head_cache)
                previous = hidden[-1]
            mx.eval(hidden, self._cache_state())
        assert hidden is not None
        self._n_past = len(tokens)
        self._head_next = len(tokens)
        self._hidden_last = hidden[-1]
        return self._logits_rows(hidden[-1:])[0]

    def step(self, token: int) -> np.ndarray:
        self._check_room(1)
        hidden = self._trunk(mx.array([[token]]), cache=self._cache)[0]
        self._n_past += 1
        return self._logits_rows(hidden)[0]

    def draft(self, last_token: int, depth: int, choose: DraftChooser) -> DraftResult:
        if self._head is None or self._hidden_last is None:
            raise RuntimeBackendError("drafting needs a prefill with the MTP head first")
        if depth == 0:
            self._flush_queue()
            return DraftResult((), np.zeros((0, self.info.vocab_size), dtype=np.float32))
        position = self._n_past
        tokens = [*self._queue_tokens, last_token]
        hidden = mx.stack([*self._queue_hidden, self._hidden_last])[None]
        self._queue_tokens, self._queue_hidden = [], []
        self._head_next = position + 1
        drafts: list[int] = []
        rows = np.empty((depth, self.info.vocab_size), dtype=np.float32)
        for index in range(depth):
            carried, logits = self._head.step(mx.array([tokens]), hidden, self._head_cache)
            rows[index] = np.array(logits[0, -1].astype(mx.float32))
            token = choose(index, rows[index])
            drafts.append(token)
            tokens, hidden = [token], carried[:, -1:, :]
        if depth > 1:
            self._head_cache.trim(depth - 1)
        return DraftResult(tuple(drafts), rows)

    def verify(self, tokens: Sequence[int]) -> VerifyResult:
        self._check_room(len(tokens))
        snapshot = self._snapshot()
        hidden = self._trunk(mx.array([list(tokens)]), cache=self._cache)[0]
        logits = self._logits_rows(hidden)
        assert self._hidden_last is not None
        self._verified = (self._n_past, tuple(tokens), hidden, self._hidden_last, snapshot)
        self._n_past += len(tokens)
        return VerifyResult(logits, np.array(hidden.astype(mx.float32)))

    def rollback(self, committed_length: int) -> None:
        if self._verified is None:
            raise RuntimeBackendError(
                "rollback without a verify: the decoding loop is out of order"
            )
        start, tokens, hidden, hidden_before, snapshot = self._verified
        self._verified = None
        accepted = committed_length - start - 1
        if not 0 <= accepted < len(tokens):
            raise RuntimeBackendError(
                f"cannot commit {committed_length} tokens after verifying positions "
                f"{start}..{start + len(tokens) - 1}"
            )
        if committed_length < start + len(tokens):
            self._restore(snapshot, start)
            self._trunk(mx.array([list(tokens[: accepted + 1])]), cache=self._cache)
            mx.eval(self._cache_state())
        first = max(self._head_next + len(self._queue_tokens), start)
        for position in range(first, committed_length):
            offset = position - start
            self._queue_tokens.append(tokens[offset])
            self._queue_hidden.append(hidden_before if offset == 0 else hidden[offset - 1])
        self._hidden_last = hidden[accepted]
        self._n_past = committed_length

    # --- helpers ----------------------------------------------------------------------------

    def _flush_queue(self) -> None:
        if self._queue_tokens:
            self._head.step(
                mx.array([self._queue_tokens]),
                mx.stack(self._queue_hidden)[None],
                self._head_cache,
            )
            mx.eval(self._head_cache.state)
            self._head_next += len(self._queue_tokens)
            self._queue_tokens, self._queue_hidden = [], []

    def _snapshot(self) -> list[Any]:
        """Per trunk cache: its arrays (recurrent state) or its offset (KV)."""
        return [
            list(cache.cache) if isinstance(cache, self._arrays_cache_type) else cache.offset
            for cache in self._cache
        ]

    def _restore(self, snapshot: list[Any], length: int) -> None:
        for cache, saved in zip(self._cache, snapshot, strict=True):
            if isinstance(cache, self._arrays_cache_type):
                cache.cache = list(saved)
            else:
                cache.trim(cache.offset - saved)
        assert all(saved == length for saved in snapshot if isinstance(saved, int)), (
            "KV cache offsets out of step with the committed length"
        )

    def _cache_state(self) -> list[Any]:
        return [
            [array for array in cache.cache if array is not None]
            if isinstance(cache, self._arrays_cache_type)
            else cache.state
            for cache in self._cache
        ]

    def _logits_rows(self, hidden: mx.array) -> np.ndarray:
        return np.array(self._project(hidden).astype(mx.float32))

    def _check_room(self, count: int) -> None:
        if self._n_past + count > self.info.context_length:
            raise RuntimeBackendError(
                f"the context window of {self._path.name} ({self.info.context_length} tokens) is "
                "full; start a new conversation or load the model with a larger context (--ctx)"
            )
