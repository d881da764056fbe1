"""The llama.cpp backend: native MTP through llama-cpp-python's low-level ctypes layer.

llama-cpp-python's high-level ``Llama`` class has no MTP, and its draft-model path breaks on hybrid
models, so this drives ``llama_cpp`` (the ctypes mirror of llama.h) and the staging functions in
``llama_cpp.llama_cpp_ext`` directly (docs/architecture.md#the-llamacpp-backend). This module is the
facade that implements :class:`DecodeBackend`; the work is in rooms of their own:

- :mod:`.model` loads the GGUF (``load_mtp`` only when ``{arch}.nextn_predict_layers`` says the
  file has a head: an MTP context on a model loaded without it aborts the process) and makes the
  contexts; :mod:`.contexts` wraps one context (decode, logits and hidden rows, memory, states);
- :mod:`.vocab` is the vocabulary, the chat template and the grammar tokenizer;
- :mod:`.drafter` is what drafts, :mod:`.mtp_head` the model's own MTP head as one;
- :mod:`.kept_states` keeps states between requests for prefix reuse, per lane;
- :mod:`.decode` runs requests: prefill, step, draft, verify, rollback.

The target context keeps ``n_rs_seq`` recurrent-state snapshots so a hybrid (gated-delta-net) trunk
can be rolled back by up to the maximum draft depth. Both the target and the MTP head's context
export the hidden state of every row (``llama_set_embeddings_nextn(ctx, True, False)``). Masked
export (``masked=True``) looks right for the draft, but in this llama.cpp the MTP graph's masked
export copies the *first* n_outputs rows of the batch, which is the wrong row as soon as a batch
carries queued rows before the drafting row (checked: for a 3-row batch whose last row is the
output, the masked export holds row 0's state); unmasked export has every row at its batch index.

A request decoded without drafts (``prefill(..., with_mtp=False)``) runs on a second target
context with no recurrent-state snapshots and no hidden-state export: keeping snapshots makes
every step of a hybrid model slower (measured: ~10 % of a demo-model step, from the extra state
copies and graph nodes), which plain decoding need not pay. That context is created the first
time a request runs plainly, so a model only ever decoded with drafts does not hold a second
KV cache; a model loaded without a usable head has only the one context, without snapshots.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import llama_cpp
import llguidance
import numpy as np

from app.engine.errors import RuntimeBackendError
from app.engine.load_options import LoadOptions, load_options_problem
from app.engine.runtime.backends.gguf_info import GgufSummary, read_gguf_summary
from app.engine.runtime.backends.llama_cpp.batch import NumpyBatch
from app.engine.runtime.backends.llama_cpp.contexts import LlamaContext
from app.engine.runtime.backends.llama_cpp.decode import Decoder
from app.engine.runtime.backends.llama_cpp.kept_states import KeptLanes, Lane
from app.engine.runtime.backends.llama_cpp.model import (
    BACKEND_NAME,
    BATCH_SIZE,
    DEFAULT_CONTEXT,
    LlamaModel,
    initialise_once,
    machine_fingerprint,
)
from app.engine.runtime.backends.llama_cpp.mtp_head import MtpHeadDrafter
from app.engine.runtime.backends.llama_cpp.vocab import LlamaVocab
from app.engine.runtime.core.backend import (
    DecodeBackend,
    DraftChooser,
    DraftResult,
    LoadSettings,
    ModelInfo,
    PrefixReuse,
    VerifyResult,
)
from app.engine.runtime.core.cpu_threads import choose_threads


class LlamaCppBackend(DecodeBackend):
    """One GGUF loaded in llama.cpp, with an MTP draft context when the file has a nextn block."""

    def __init__(self, path: Path, settings: LoadSettings) -> None:
        summary = read_gguf_summary(path)
        initialise_once()
        self._path = Path(path)
        self._model: LlamaModel | None = None
        self._contexts: list[LlamaContext] = []
        try:
            self._open(summary, settings)
        except BaseException:
            self.close()
            raise

    def _open(self, summary: GgufSummary, settings: LoadSettings) -> None:
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
        mtp_reason = summary.mtp_unavailable_reason
        model = self._model = LlamaModel(
            self._path, summary, load_mtp=mtp_reason is None, gpu_layers=settings.gpu_layers
        )
        self._vocab = LlamaVocab(model.vocab, model.vocab_size, summary.chat_template)
        trained = model.trained_context
        self._context_size = settings.context_length or min(
            DEFAULT_CONTEXT, trained or DEFAULT_CONTEXT
        )
        self._threads = choose_threads(settings.threads)
        self._settings = settings
        depth = settings.max_draft_depth if mtp_reason is None else 0
        self._on_cpu_alone = self._threads.threads == 1 and (
            settings.gpu_layers == 0 or not llama_cpp.llama_supports_gpu_offload()
        )
        self._fingerprint = machine_fingerprint(
            self._threads, settings.gpu_layers, self.cycle_clock.__name__
        )
        target = self._new_context(rollback_depth=depth)
        batch = NumpyBatch(BATCH_SIZE, model.width)
        drafter, mtp_reason = self._open_drafter(target, batch, mtp_reason)
        self.info = ModelInfo(
            path=self._path,
            backend=BACKEND_NAME,
            architecture=summary.architecture,
            vocab_size=model.vocab_size,
            context_length=target.size,
            embedding_length=model.width,
            mtp_layers=summary.nextn_layers,
            max_draft_depth=depth if mtp_reason is None else 0,
            mtp_unavailable_reason=mtp_reason,
            has_chat_template=summary.chat_template is not None,
            threads=self._threads,
        )
        drafting = Lane("drafting", target, drafter, self._zero_hidden())
        kept = KeptLanes(
            settings.state_cache_mib * 1024 * 1024,
            recurrent=model.recurrent,
            model_name=self._path.name,
        )
        plain = drafting if depth == 0 else None  # no snapshots anyway: share the one context
        self._decoder = Decoder(self.info, drafting, plain, self._open_plain_lane, kept, batch)
        self._batch = batch
        self._last_reuse = PrefixReuse()
        self._warm_up()

    def _new_context(
        self, *, rollback_depth: int = 0, reads: LlamaContext | None = None
    ) -> LlamaContext:
        assert self._model is not None
        context = self._model.new_context(
            self._context_size,
            self._threads,
            kv_cache_type=self._settings.kv_cache_type,
            flash_attention=self._settings.flash_attention,
            rollback_depth=rollback_depth,
            reads=reads,
        )
        self._contexts.append(context)
        return context

    def _open_drafter(
        self, target: LlamaContext, batch: NumpyBatch, mtp_reason: str | None
    ) -> tuple[MtpHeadDrafter | None, str | None]:
        """The MTP head's drafter, or None and why decoding runs autoregressively."""
        assert self._model is not None
        if mtp_reason is None and self._model.input_width != self._model.width:
            mtp_reason = (
                f"{self._path.name}: the MTP head's input width does not match the trunk's "
                "hidden size, so decoding runs autoregressively"
            )
        if mtp_reason is not None:
            return None, mtp_reason
        try:
            head = self._new_context(reads=target)
        except RuntimeBackendError as exc:
            return None, f"{exc}; decoding runs autoregressively"
        return MtpHeadDrafter(head, batch), None

    def _zero_hidden(self) -> np.ndarray:
        return np.zeros(self.info.embedding_length, dtype=np.float32)

    def _open_plain_lane(self) -> Lane:
        """The lane of plain requests: a target with no snapshots and no hidden-state export."""
        context = self._new_context()
        context.decode(self._batch.fill([0], 0, outputs="last"), "a warm-up row")
        context.clear()
        return Lane("plain", context, None, self._zero_hidden())

    def _warm_up(self) -> None:
        """Run one row through each context so first-use allocations don't land in a TTFT."""
        can_draft = self.info.mtp_available
        self.prefill([0], with_mtp=can_draft)
        if can_draft:
            self.draft(0, 1, lambda _index, _logits: 0)
        self.reset()

    @property
    def contexts(self) -> tuple[LlamaContext, ...]:
        """The llama.cpp contexts open now (the drafting target first)."""
        return tuple(self._contexts)

    def close(self) -> None:
        for context in reversed(self._contexts):
            context.close()
        self._contexts = []
        if self._model is not None:
            self._model.close()
        self._model = None

    # --- text -------------------------------------------------------------------------------

    def tokenize(self, text: str, *, parse_special: bool) -> list[int]:
        return self._vocab.tokenize(text, parse_special=parse_special)

    def token_bytes(self, token: int) -> bytes:
        return self._vocab.token_bytes(token)

    def is_end_of_generation(self, token: int) -> bool:
        return self._vocab.is_end_of_generation(token)

    def grammar_tokenizer(self) -> llguidance.LLTokenizer:
        return self._vocab.grammar_tokenizer()

    @property
    def chat_template(self) -> str | None:
        return self._vocab.chat_template

    @property
    def special_token_texts(self) -> dict[str, str]:
        return self._vocab.special_token_texts

    @property
    def bos_token_id(self) -> int | None:
        return self._vocab.bos_token_id

    @property
    def performance_fingerprint(self) -> str:
        return self._fingerprint

    @property
    def compute_seconds(self) -> float:
        return self._model.compute.seconds if self._model is not None else 0.0

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
        return self._decoder.n_past

    def reset(self) -> None:
        self._decoder.reset()

    @property
    def last_prefix_reuse(self) -> PrefixReuse:
        return self._last_reuse

    @property
    def kept_state_bytes(self) -> int:
        return self._decoder.kept.total_bytes

    def reusable_prefix(self, tokens: Sequence[int], *, with_mtp: bool) -> int:
        return self._decoder.reusable_prefix(tokens, with_mtp)

    def prefill(
        self, tokens: Sequence[int], *, with_mtp: bool, keep_at: Sequence[int] = ()
    ) -> np.ndarray:
        logits, start, source = self._decoder.prefill(tokens, with_mtp, keep_at)
        self._last_reuse = PrefixReuse(start, len(tokens) - start, source if start else "")
        return logits

    def step(self, token: int) -> np.ndarray:
        return self._decoder.step(token)

    def draft(self, last_token: int, depth: int, choose: DraftChooser) -> DraftResult:
        return self._decoder.draft(last_token, depth, choose)

    def verify(self, tokens: Sequence[int]) -> VerifyResult:
        return self._decoder.verify(tokens)

    def rollback(self, committed_length: int) -> None:
        self._decoder.rollback(committed_length)
