"""The llama.cpp backend: native MTP through llama-cpp-python's low-level ctypes layer.

llama-cpp-python's high-level ``Llama`` class has no MTP, and its draft-model path breaks on
hybrid models, so this drives ``llama_cpp`` (the ctypes mirror of llama.h) and the staging
functions in ``llama_cpp.llama_cpp_ext`` directly (docs/architecture.md#the-llamacpp-backend):

- the GGUF's ``{arch}.nextn_predict_layers`` is read first (``gguf_info``); only then is the
  model loaded with ``load_mtp`` (an MTP context on a model loaded without it aborts the process);
- the target context keeps ``n_rs_seq`` recurrent-state snapshots so a hybrid (gated-delta-net)
  trunk can be rolled back by up to the maximum draft depth;
- the draft context (``LLAMA_CONTEXT_TYPE_MTP``, ``ctx_other`` = target) runs the nextn block;
  its row at position p carries token x_p and the trunk's hidden state h_{p−1};
- both contexts export the hidden state of every row (``llama_set_embeddings_nextn(ctx, True,
  False)``). Masked export (``masked=True``) looks right for the draft, but in this llama.cpp the
  MTP graph's masked export copies the *first* n_outputs rows of the batch, which is the wrong row
  as soon as a batch carries queued rows before the drafting row (checked: for a 3-row batch
  whose last row is the output, the masked export holds row 0's state); unmasked export has
  every row at its batch index.

The head's cache is kept behind to save decodes: rows for tokens committed by a verify, and by
plain steps while the head is idle (depth-0 stretches of the adaptive depth), are queued and
decoded in one batch together with the next cycle's first draft row. A step therefore costs
what a plain step costs, plus copying one hidden-state row.

A request decoded without drafts (``prefill(..., with_mtp=False)``) runs on a second target
context with no recurrent-state snapshots and no hidden-state export: keeping snapshots makes
every step of a hybrid model slower (measured: ~10 % of a demo-model step, from the extra state
copies and graph nodes), which plain decoding need not pay. That context is created the first
time a request runs plainly, so a model only ever decoded with drafts does not hold a second
KV cache; a model loaded without a usable head has only the one context, without snapshots.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import llama_cpp
import llguidance
import numpy as np
from llama_cpp import llama_cpp_ext
from llguidance.llamacpp import lltokenizer_from_vocab

from app.engine.errors import RuntimeBackendError
from app.engine.learned_state import cpu_name
from app.engine.load_options import LoadOptions, load_options_problem
from app.engine.runtime.backends.gguf_info import read_gguf_summary
from app.engine.runtime.backends.llama_cpp import log as llama_cpp_log
from app.engine.runtime.backends.llama_cpp.batch import NumpyBatch
from app.engine.runtime.backends.llama_cpp.cpu_backends import CpuVariant, load_installed
from app.engine.runtime.backends.llama_cpp.states import (
    RECURRENT_ONLY,
    WHOLE,
    copy_state,
    restore_state,
    state_size,
)
from app.engine.runtime.backends.prefix_cache import (
    SAVE_MIN_TOKENS,
    KeptState,
    KeptStates,
    Session,
    checkpoint_marks,
    chunk_ends,
    common_prefix_length,
    resume_point,
)
from app.engine.runtime.core.backend import (
    STOP_DRAFTING,
    DecodeBackend,
    DraftChooser,
    DraftResult,
    LoadSettings,
    ModelInfo,
    PrefixReuse,
    VerifyResult,
    default_threads,
)

log = logging.getLogger(__name__)

BACKEND_NAME = "llama.cpp"
DEFAULT_CONTEXT = 4096
BATCH_SIZE = 512
_GPU_LAYERS_ALL = 999
KV_CACHE_TYPES = {
    "f16": llama_cpp.GGML_TYPE_F16,
    "q8_0": llama_cpp.GGML_TYPE_Q8_0,
    "q4_0": llama_cpp.GGML_TYPE_Q4_0,
}
FLASH_ATTENTION_MODES = {
    "auto": llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO,
    "on": llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED,
    "off": llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED,
}


_backend_initialised = False
_cpu_variant: CpuVariant | None = None


def _initialise_once() -> None:
    global _backend_initialised, _cpu_variant
    if not _backend_initialised:
        llama_cpp_log.install()
        _cpu_variant = load_installed()
        llama_cpp.llama_backend_init()
        _backend_initialised = True


def _machine_fingerprint(threads: int, gpu_layers: int, clock: str) -> str:
    """A short hash of the CPU, the llama.cpp build (its system info names the CPU features and
    GPU backends it uses), the llama-cpp-python version, threads, GPU offload and the clock
    cycles are timed with (times on different clocks cannot be compared)."""
    parts = (
        platform.machine(),
        cpu_name(),
        str(os.cpu_count()),
        llama_cpp.__version__,
        llama_cpp.llama_print_system_info().decode("utf-8", "replace"),
        f"threads={threads}",
        f"gpu_layers={gpu_layers}",
        f"clock={clock}",
    )
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return f"{BACKEND_NAME}:{digest}"


class LlamaCppBackend(DecodeBackend):
    """One GGUF loaded in llama.cpp, with an MTP draft context when the file has a nextn block."""

    def __init__(self, path: Path, settings: LoadSettings) -> None:
        summary = read_gguf_summary(path)
        _initialise_once()
        self._path = Path(path)
        self._summary = summary
        self._model = self._target = self._draft_ctx = self._plain_ctx = None
        try:
            self._open(settings)
        except BaseException:
            self.close()
            raise

    def _open(self, settings: LoadSettings) -> None:
        problem = load_options_problem(
            LoadOptions(
                settings.context_length,
                settings.kv_cache_type,
                settings.flash_attention,
                settings.state_cache_mib,
            )
        )
        if problem is not None:
            raise RuntimeBackendError(problem)
        mtp_reason = self._summary.mtp_unavailable_reason
        self._model = self._load_model(load_mtp=mtp_reason is None, gpu_layers=settings.gpu_layers)
        self._vocab = llama_cpp.llama_model_get_vocab(self._model)
        self._vocab_size = llama_cpp.llama_vocab_n_tokens(self._vocab)
        self._width = llama_cpp.llama_model_n_embd_out(self._model)
        trained = llama_cpp.llama_model_n_ctx_train(self._model)
        context = settings.context_length or min(DEFAULT_CONTEXT, trained or DEFAULT_CONTEXT)
        threads = settings.threads or default_threads()
        depth = settings.max_draft_depth if mtp_reason is None else 0
        self._context_size, self._threads = context, threads
        self._settings = settings
        self._on_cpu_alone = threads == 1 and (
            settings.gpu_layers == 0 or not llama_cpp.llama_supports_gpu_offload()
        )
        self._fingerprint = _machine_fingerprint(
            threads, settings.gpu_layers, self.cycle_clock.__name__
        )

        self._target = self._new_context(context, threads, rollback_depth=depth, other=None)
        if mtp_reason is None and llama_cpp.llama_model_n_embd_inp(self._model) != self._width:
            mtp_reason = (
                f"{self._path.name}: the MTP head's input width does not match the trunk's "
                "hidden size, so decoding runs autoregressively"
            )
        if mtp_reason is None:
            try:
                self._draft_ctx = self._new_context(
                    context, threads, rollback_depth=0, other=self._target
                )
            except RuntimeBackendError as exc:
                mtp_reason = f"{exc}; decoding runs autoregressively"
            else:
                llama_cpp_ext.llama_set_embeddings_nextn(self._draft_ctx, True, False)
        self._target_memory = llama_cpp.llama_get_memory(self._target)
        if depth == 0:  # no snapshots anyway: plain requests share the one context
            self._plain_ctx = self._target
        self._plain_memory = (
            llama_cpp.llama_get_memory(self._plain_ctx) if self._plain_ctx is not None else None
        )
        self._active, self._active_memory = self._target, self._target_memory
        self._draft_memory = (
            llama_cpp.llama_get_memory(self._draft_ctx) if self._draft_ctx is not None else None
        )
        self._batch = NumpyBatch(BATCH_SIZE, self._width)
        self._piece_cache: dict[int, bytes] = {}
        self._end_cache: dict[int, bool] = {}
        self._grammar_tokenizer: llguidance.LLTokenizer | None = None

        self.info = ModelInfo(
            path=self._path,
            backend=BACKEND_NAME,
            architecture=self._summary.architecture,
            vocab_size=self._vocab_size,
            context_length=llama_cpp.llama_n_ctx(self._target),
            embedding_length=self._width,
            mtp_layers=self._summary.nextn_layers,
            max_draft_depth=depth if mtp_reason is None else 0,
            mtp_unavailable_reason=mtp_reason,
            has_chat_template=self._summary.chat_template is not None,
            cpu_variant=_cpu_variant.name if _cpu_variant is not None else None,
        )
        self._recurrent = bool(
            llama_cpp.llama_model_is_recurrent(self._model)
            or llama_cpp.llama_model_is_hybrid(self._model)
        )
        self._kept = KeptStates(settings.state_cache_mib * 1024 * 1024)
        self._head_valid: dict[str, bool] = {}
        self._last_reuse = PrefixReuse()
        self._active_lane = self._lane_name(with_mtp=True)
        self._n_past = 0
        self._head_active = False
        self._hidden_last = np.zeros(self._width, dtype=np.float32)
        self._head_queue_start = 0
        self._head_queue_tokens: list[int] = []
        self._head_queue_hidden: list[np.ndarray] = []
        self._verified: tuple[int, Sequence[int], np.ndarray, np.ndarray] | None = None
        self._warm_up()

    # --- loading ----------------------------------------------------------------------------

    def _load_model(self, *, load_mtp: bool, gpu_layers: int) -> llama_cpp.llama_model_p:
        params = llama_cpp.llama_model_default_params()
        params.load_mtp = load_mtp
        if gpu_layers >= 0:
            params.n_gpu_layers = gpu_layers
        elif llama_cpp.llama_supports_gpu_offload():
            params.n_gpu_layers = _GPU_LAYERS_ALL
        model = llama_cpp.llama_model_load_from_file(str(self._path).encode(), params)
        if not model:
            raise RuntimeBackendError(
                f"llama.cpp could not load {self._path} ({llama_cpp_log.take_recent()}); the file "
                "may be truncated or of an architecture this llama.cpp does not support"
            )
        return model

    def _new_context(
        self,
        context: int,
        threads: int,
        *,
        rollback_depth: int,
        other: llama_cpp.llama_context_p | None,
    ) -> llama_cpp.llama_context_p:
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = context
        params.n_batch = BATCH_SIZE
        params.n_ubatch = BATCH_SIZE
        params.n_seq_max = 1
        params.n_threads = threads
        params.n_threads_batch = threads
        params.no_perf = True
        params.type_k = params.type_v = KV_CACHE_TYPES[self._settings.kv_cache_type]
        params.flash_attn_type = FLASH_ATTENTION_MODES[self._settings.flash_attention]
        if other is None:
            params.n_rs_seq = rollback_depth
        else:
            params.ctx_type = llama_cpp.LLAMA_CONTEXT_TYPE_MTP
            params.ctx_other = other
            params.n_rs_seq = 0
        ctx = llama_cpp.llama_init_from_model(self._model, params)
        if not ctx:
            role = "MTP draft" if other is not None else "inference"
            raise RuntimeBackendError(
                f"llama.cpp could not create the {role} context for {self._path.name} with "
                f"{context} tokens ({llama_cpp_log.take_recent()}); try a smaller --ctx"
            )
        return ctx

    def _warm_up(self) -> None:
        """Run one row through each context so first-use allocations don't land in a TTFT."""
        self.prefill([0], with_mtp=self._draft_ctx is not None)
        if self._draft_ctx is not None:
            self.draft(0, 1, lambda _index, _logits: 0)
        self.reset()

    def _open_plain_context(self) -> None:
        """The target context of plain requests: no snapshots, no hidden-state export."""
        self._plain_ctx = self._new_context(
            self._context_size, self._threads, rollback_depth=0, other=None
        )
        self._plain_memory = llama_cpp.llama_get_memory(self._plain_ctx)
        self._decode(self._plain_ctx, self._batch.fill([0], 0, outputs="last"), "a warm-up row")
        llama_cpp.llama_memory_clear(self._plain_memory, True)

    def close(self) -> None:
        contexts = (self._draft_ctx, self._target, self._plain_ctx)
        for ctx in dict.fromkeys(ctx for ctx in contexts if ctx):
            llama_cpp.llama_free(ctx)
        if self._model:
            llama_cpp.llama_model_free(self._model)
        self._draft_ctx = self._target = self._plain_ctx = self._model = None

    # --- text -------------------------------------------------------------------------------

    def tokenize(self, text: str, *, parse_special: bool) -> list[int]:
        data = text.encode("utf-8")
        capacity = len(data) + 8
        buffer = (llama_cpp.llama_token * capacity)()
        count = llama_cpp.llama_tokenize(
            self._vocab, data, len(data), buffer, capacity, False, parse_special
        )
        if count < 0:
            capacity = -count
            buffer = (llama_cpp.llama_token * capacity)()
            count = llama_cpp.llama_tokenize(
                self._vocab, data, len(data), buffer, capacity, False, parse_special
            )
        return list(buffer[:count])

    def token_bytes(self, token: int) -> bytes:
        piece = self._piece_cache.get(token)
        if piece is None:
            piece = self._piece(token, special=False)
            self._piece_cache[token] = piece
        return piece

    def _piece(self, token: int, *, special: bool) -> bytes:
        buffer = ctypes.create_string_buffer(64)
        length = llama_cpp.llama_token_to_piece(self._vocab, token, buffer, 64, 0, special)
        if length < 0:
            buffer = ctypes.create_string_buffer(-length)
            length = llama_cpp.llama_token_to_piece(self._vocab, token, buffer, -length, 0, special)
        return buffer.raw[:length]

    def is_end_of_generation(self, token: int) -> bool:
        end = self._end_cache.get(token)
        if end is None:
            end = self._end_cache[token] = bool(llama_cpp.llama_vocab_is_eog(self._vocab, token))
        return end

    def grammar_tokenizer(self) -> llguidance.LLTokenizer:
        if self._grammar_tokenizer is None:
            ends = [token for token in range(self._vocab_size) if self.is_end_of_generation(token)]
            with warnings.catch_warnings():  # it reads token attributes with a deprecated call
                warnings.simplefilter("ignore", DeprecationWarning)
                self._grammar_tokenizer = lltokenizer_from_vocab(
                    self._vocab, eos_token=ends or None, n_vocab=self._vocab_size
                )
        return self._grammar_tokenizer

    @property
    def chat_template(self) -> str | None:
        return self._summary.chat_template

    @property
    def special_token_texts(self) -> dict[str, str]:
        texts = {}
        for name, token in (
            ("bos_token", llama_cpp.llama_vocab_bos(self._vocab)),
            ("eos_token", llama_cpp.llama_vocab_eos(self._vocab)),
        ):
            texts[name] = (
                self._piece(token, special=True).decode("utf-8", "replace") if token >= 0 else ""
            )
        return texts

    @property
    def bos_token_id(self) -> int | None:
        bos = llama_cpp.llama_vocab_bos(self._vocab)
        return bos if bos >= 0 and llama_cpp.llama_vocab_get_add_bos(self._vocab) else None

    @property
    def performance_fingerprint(self) -> str:
        return self._fingerprint

    @property
    def cycle_clock(self) -> Callable[[], float]:
        """On the CPU with one thread, every cycle's work runs on the calling thread, so its CPU
        time is the cycle's cost without the time other processes took the core: on a shared
        machine the wall time of a cycle varied 3× with the load and misled the adaptive depth.
        With more threads or a GPU, the work runs elsewhere: wall time."""
        return time.thread_time if self._on_cpu_alone else time.perf_counter

    # --- decoding ---------------------------------------------------------------------------

    @property
    def committed_length(self) -> int:
        return self._n_past

    def reset(self) -> None:
        for memory in dict.fromkeys((self._target_memory, self._plain_memory, self._draft_memory)):
            if memory is not None:
                llama_cpp.llama_memory_clear(memory, True)
        self._kept.clear()
        self._head_valid.clear()
        self._n_past = 0
        self._head_active = False
        self._head_queue_start = 0
        self._head_queue_tokens = []
        self._head_queue_hidden = []
        self._verified = None

    @property
    def last_prefix_reuse(self) -> PrefixReuse:
        return self._last_reuse

    @property
    def kept_state_bytes(self) -> int:
        return self._kept.total_bytes

    def prefill(
        self, tokens: Sequence[int], *, with_mtp: bool, keep_at: Sequence[int] = ()
    ) -> np.ndarray:
        if with_mtp and self._draft_ctx is None:
            raise RuntimeBackendError(
                f"{self._path.name} has no usable MTP head: {self.info.mtp_unavailable_reason}"
            )
        if len(tokens) > self.info.context_length:
            raise RuntimeBackendError(
                f"the context window of {self._path.name} ({self.info.context_length} tokens) is "
                "full; start a new conversation or load the model with a larger context (--ctx)"
            )
        if not with_mtp and self._plain_ctx is None:
            self._open_plain_context()
        if with_mtp:
            self._active, self._active_memory = self._target, self._target_memory
            llama_cpp_ext.llama_set_embeddings_nextn(self._target, True, False)
        else:
            self._active, self._active_memory = self._plain_ctx, self._plain_memory
        lane = self._lane_name(with_mtp)
        self._verified = None
        try:
            start, source, continuing = self._resume(lane, tokens, with_mtp)
            logits = self._run_prompt(
                lane, tokens, start, with_mtp, continuing=continuing, keep_at=keep_at
            )
        except BaseException:
            self._forget_lane(lane)
            raise
        self._last_reuse = PrefixReuse(start, len(tokens) - start, source if start else "")
        return logits

    # --- prefix reuse -----------------------------------------------------------------------

    def _lane_name(self, with_mtp: bool) -> str:
        """The drafting lane (target and head contexts) or the plain one (its own context)."""
        return "drafting" if with_mtp or self._plain_ctx is self._target else "plain"

    def reusable_prefix(self, tokens: Sequence[int], *, with_mtp: bool) -> int:
        if with_mtp and self._draft_ctx is None:
            return 0
        return self._plan(self._lane_name(with_mtp), tokens, with_mtp)[1]

    def _plan(self, lane: str, tokens: Sequence[int], with_mtp: bool) -> tuple[Session | None, int]:
        """The saved session worth restoring for ``tokens`` (None: the live one is as good)
        and the length the prompt would resume at (prefix_cache.resume_point says which
        lengths qualify)."""
        live = self._kept.live_session(lane)

        def point(session: Session) -> int:
            return resume_point(
                session.tokens,
                tokens,
                rewindable=not self._recurrent,
                checkpoints=session.checkpoints,
            )

        live_point = point(live) if not with_mtp or self._head_valid.get(lane, False) else 0
        candidates = [
            session
            for session in self._kept.saved_sessions(lane)
            if not with_mtp or session.saved.payload[1] is not None
        ]
        best = max(candidates, key=point, default=None)
        if best is None or point(best) <= live_point:
            return None, live_point
        return best, point(best)

    def _resume(self, lane: str, tokens: Sequence[int], with_mtp: bool) -> tuple[int, str, bool]:
        """Bring the lane's context to the longest kept prefix of ``tokens``; return its
        length, where it came from (a :class:`PrefixReuse` source) and whether the state was
        continued as it was kept rather than cut back."""
        live = self._kept.live_session(lane)
        best, point = self._plan(lane, tokens, with_mtp)
        displaced = (
            len(live.tokens) >= SAVE_MIN_TOKENS
            and common_prefix_length(live.tokens, tokens) < len(live.tokens) // 2
        )
        if displaced and (not with_mtp or self._head_valid.get(lane, False)):
            self._save_live(lane)
        try:
            if best is not None:
                self._restore_saved(best)
                live, source = best, "saved"
            else:
                source = "live"
            continuing = point == len(live.tokens)
            if not continuing and source == "live":
                source = "checkpoint" if self._recurrent else "trimmed"
            return self._rewind(lane, point, with_mtp), source, continuing
        except RuntimeBackendError as exc:  # a kept state llama.cpp would not take back
            log.warning("computing the prompt from the start: %s", exc)
            self._forget_lane(lane)
            return self._rewind(lane, 0, with_mtp), "", False

    def _rewind(self, lane: str, length: int, with_mtp: bool) -> int:
        """Keep the first ``length`` tokens of the lane's live state (0: clear it)."""
        live = self._kept.live_session(lane)
        memory = self._active_memory
        if length == 0:
            llama_cpp.llama_memory_clear(memory, True)
            if with_mtp:
                llama_cpp.llama_memory_clear(self._draft_memory, True)
                self._head_queue_tokens, self._head_queue_hidden = [], []
            self._kept.forget_live(lane)
            return 0
        if with_mtp:  # the head keeps its rows 0..length: the queued ones are decoded first
            self._flush_head_queue(keep_last_rows=0)
        if length == len(live.tokens):
            return length
        if self._recurrent:
            restore_state(self._active, live.checkpoints[length].payload, RECURRENT_ONLY)
            self._kept.touch(live.checkpoints[length])
        if not llama_cpp.llama_memory_seq_rm(memory, 0, length, -1) or (
            with_mtp and not llama_cpp.llama_memory_seq_rm(self._draft_memory, 0, length + 1, -1)
        ):
            raise RuntimeBackendError(
                f"llama.cpp refused to trim the kept state of {self._path.name} to {length} tokens"
            )
        live.keep_first(length)
        return length

    def _save_live(self, lane: str) -> None:
        """Keep a copy of the lane's whole live state (trunk, and head on the drafting lane),
        unless it alone would exceed the budget."""
        with_head = lane == "drafting" and self._head_valid.get(lane, False)
        size = state_size(self._active, WHOLE)
        if with_head:
            size += state_size(self._draft_ctx, WHOLE)
        if size > self._kept.budget_bytes:
            return
        head = None
        if with_head:
            self._flush_head_queue(keep_last_rows=0)
            head = copy_state(self._draft_ctx, WHOLE)
        trunk = copy_state(self._active, WHOLE)
        nbytes = trunk.nbytes + (head.nbytes if head is not None else 0)
        self._kept.save_copy_of_live(
            lane, KeptState(nbytes, (trunk, head)), extra=self._hidden_last.copy()
        )

    def _restore_saved(self, session: Session) -> None:
        assert session.saved is not None
        trunk, head = session.saved.payload
        restore_state(self._active, trunk, WHOLE)
        if head is not None:
            restore_state(self._draft_ctx, head, WHOLE)
            self._hidden_last = session.extra
        self._head_valid[session.lane] = head is not None
        self._head_queue_tokens, self._head_queue_hidden = [], []
        self._kept.restore(session)

    def _forget_lane(self, lane: str) -> None:
        """After a failure the lane's state is unknown: clear it, keep nothing of it live."""
        llama_cpp.llama_memory_clear(self._active_memory, True)
        if lane == "drafting" and self._draft_memory is not None:
            llama_cpp.llama_memory_clear(self._draft_memory, True)
        self._kept.forget_live(lane)
        self._head_valid[lane] = False
        self._n_past = 0

    def _keep_checkpoint(self, lane: str, length: int) -> None:
        if state_size(self._active, RECURRENT_ONLY) > self._kept.budget_bytes:
            return
        state = copy_state(self._active, RECURRENT_ONLY)
        self._kept.add_checkpoint(lane, length, KeptState(state.nbytes, state))

    def _run_prompt(
        self,
        lane: str,
        tokens: Sequence[int],
        start: int,
        with_mtp: bool,
        *,
        continuing: bool,
        keep_at: Sequence[int],
    ) -> np.ndarray:
        """Compute ``tokens[start:]`` after a resume at ``start``; the last row's logits.

        The head's row at p pairs x_p with h_{p-1}: continuing the live state, the first row
        takes the kept last hidden state; after a rewind the head already holds the row at
        ``start`` (it keeps one row more than the trunk), so its rows begin at ``start + 1``.
        """
        live = self._kept.live_session(lane)
        continuing = continuing and start > 0
        marks: list[int] = []
        if self._recurrent:
            if continuing and start not in live.checkpoints:
                self._keep_checkpoint(lane, start)  # the end of the last committed reply
            marks = checkpoint_marks(start, len(tokens), wanted=keep_at)
        if start == 0:
            previous_hidden: np.ndarray | None = np.zeros(self._width, dtype=np.float32)
        else:
            previous_hidden = self._hidden_last if continuing else None
        position = start
        for end in chunk_ends(start, len(tokens), marks, BATCH_SIZE):
            chunk = tokens[position:end]
            self._decode(
                self._active,
                self._batch.fill(chunk, position, outputs="last" if end == len(tokens) else "none"),
                "the prompt",
            )
            if with_mtp:
                hidden = self._hidden_rows(self._target, len(chunk))
                if previous_hidden is None:
                    head_tokens, head_hidden, head_start = chunk[1:], hidden[:-1], position + 1
                else:
                    head_tokens, head_start = chunk, position
                    head_hidden = np.vstack([previous_hidden[None, :], hidden[:-1]])
                if len(head_tokens):
                    self._decode(
                        self._draft_ctx,
                        self._batch.fill(
                            head_tokens, head_start, outputs="none", hidden=head_hidden
                        ),
                        "the prompt through the MTP head",
                    )
                previous_hidden = hidden[-1].copy()
            live.tokens.extend(chunk)
            position = end
            if end in marks:
                self._keep_checkpoint(lane, end)
        self._n_past = len(tokens)
        self._head_active = with_mtp
        self._head_valid[lane] = with_mtp
        self._active_lane = lane
        if with_mtp:
            self._hidden_last = previous_hidden
            self._head_queue_start = len(tokens)
        return self._logits_rows(self._active, 1)[0].copy()

    def step(self, token: int) -> np.ndarray:
        self._check_room(1)
        self._decode(
            self._active, self._batch.fill([token], self._n_past, outputs="all"), "a token"
        )
        if self._head_active:
            # The head's row for ``token`` pairs it with the hidden state before it; it is
            # decoded with the next draft (docs/architecture.md#the-llamacpp-backend, step 5).
            self._head_queue_tokens.append(token)
            self._head_queue_hidden.append(self._hidden_last[None, :])
            self._hidden_last = self._hidden_rows(self._target, 1)[0].copy()
        self._kept.live_session(self._active_lane).tokens.append(token)
        self._n_past += 1
        return self._logits_rows(self._active, 1)[0].copy()

    def draft(self, last_token: int, depth: int, choose: DraftChooser) -> DraftResult:
        self._require_head("draft")
        if depth == 0:
            self._flush_head_queue(keep_last_rows=0)
            return DraftResult((), np.zeros((0, self._vocab_size), dtype=np.float32))
        position = self._n_past
        self._flush_head_queue(keep_last_rows=BATCH_SIZE - 1)
        rows_hidden = np.vstack([*self._head_queue_hidden, self._hidden_last[None, :]])
        rows = len(rows_hidden)
        batch = self._batch.fill(
            [*self._head_queue_tokens, last_token],
            self._head_queue_start,
            outputs="last",
            hidden=rows_hidden,
        )
        self._head_queue_tokens, self._head_queue_hidden = [], []
        self._head_queue_start = position + 1
        drafts: list[int] = []
        logits_rows = np.empty((depth, self._vocab_size), dtype=np.float32)
        for index in range(depth):
            self._decode(self._draft_ctx, batch, "a draft step")
            logits_rows[index] = self._logits_rows(self._draft_ctx, 1)[0]
            token = choose(index, logits_rows[index])
            if token == STOP_DRAFTING:
                break
            drafts.append(token)
            if index + 1 < depth:
                head_hidden = self._hidden_rows(self._draft_ctx, rows)[rows - 1 :]
                batch = self._batch.fill(
                    [token], position + index + 1, outputs="last", hidden=head_hidden
                )
                rows = 1
        if drafts and not llama_cpp.llama_memory_seq_rm(  # the rows after the first
            self._draft_memory, 0, position + 1, -1
        ):
            raise RuntimeBackendError(
                f"llama.cpp refused to trim the MTP head's cache of {self._path.name}"
            )
        return DraftResult(tuple(drafts), logits_rows[: len(drafts)])

    def verify(self, tokens: Sequence[int]) -> VerifyResult:
        self._require_head("verify drafts")
        self._check_room(len(tokens))
        start = self._n_past
        self._decode(self._target, self._batch.fill(tokens, start, outputs="all"), "a verify batch")
        logits = self._logits_rows(self._target, len(tokens)).copy()
        hidden = self._hidden_rows(self._target, len(tokens)).copy()
        self._verified = (start, tuple(tokens), hidden, self._hidden_last)
        self._kept.live_session(self._active_lane).tokens.extend(tokens)
        self._n_past = start + len(tokens)
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
        if committed_length < self._n_past and not llama_cpp.llama_memory_seq_rm(
            self._target_memory, 0, committed_length, -1
        ):
            raise RuntimeBackendError(
                f"llama.cpp refused to roll {self._path.name} back to {committed_length} tokens; "
                f"the model's recurrent state keeps {self.info.max_draft_depth} snapshots, so use "
                "an MTP depth no larger than that"
            )
        for position in range(max(self._head_queue_start, start), committed_length):
            offset = position - start
            self._head_queue_tokens.append(tokens[offset])
            self._head_queue_hidden.append(
                hidden_before[None, :] if offset == 0 else hidden[offset - 1 : offset]
            )
        self._hidden_last = hidden[accepted].copy()
        del self._kept.live_session(self._active_lane).tokens[committed_length:]
        self._n_past = committed_length

    # --- helpers ----------------------------------------------------------------------------

    def _flush_head_queue(self, keep_last_rows: int) -> None:
        """Decode queued head rows beyond what fits in one batch with the next draft row."""
        while len(self._head_queue_tokens) > keep_last_rows:
            count = len(self._head_queue_tokens) - keep_last_rows
            count = min(count, BATCH_SIZE)
            self._decode(
                self._draft_ctx,
                self._batch.fill(
                    self._head_queue_tokens[:count],
                    self._head_queue_start,
                    outputs="none",
                    hidden=np.vstack(self._head_queue_hidden[:count]),
                ),
                "queued rows through the MTP head",
            )
            del self._head_queue_tokens[:count]
            del self._head_queue_hidden[:count]
            self._head_queue_start += count

    def _require_head(self, action: str) -> None:
        if not self._head_active:
            raise RuntimeBackendError(
                f"cannot {action}: this request was prefilled without the MTP head "
                "(prefill with_mtp=True first); the decoding loop is out of order"
            )

    def _check_room(self, count: int) -> None:
        if self._n_past + count > self.info.context_length:
            raise RuntimeBackendError(
                f"the context window of {self._path.name} ({self.info.context_length} tokens) is "
                "full; start a new conversation or load the model with a larger context (--ctx)"
            )

    def _decode(
        self, ctx: llama_cpp.llama_context_p, batch: llama_cpp.llama_batch, what: str
    ) -> None:
        code = llama_cpp.llama_decode(ctx, batch)
        if code != 0:
            raise RuntimeBackendError(
                f"llama.cpp failed to decode {what} of {self._path.name} (code {code}: "
                f"{llama_cpp_log.take_recent()})"
            )

    def _logits_rows(self, ctx: llama_cpp.llama_context_p, rows: int) -> np.ndarray:
        pointer = llama_cpp.llama_get_logits(ctx)
        return np.ctypeslib.as_array(pointer, shape=(rows, self._vocab_size))

    def _hidden_rows(self, ctx: llama_cpp.llama_context_p, rows: int) -> np.ndarray:
        pointer = llama_cpp_ext.llama_get_embeddings_nextn(ctx)
        return np.ctypeslib.as_array(pointer, shape=(rows, self._width))
