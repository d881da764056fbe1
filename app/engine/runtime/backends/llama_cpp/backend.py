"""The llama.cpp backend: native MTP through llama-cpp-python's low-level ctypes layer.

llama-cpp-python's high-level ``Llama`` class has no MTP, and its draft-model path breaks on hybrid
models, so this drives ``llama_cpp`` (the ctypes mirror of llama.h) and the staging functions in
``llama_cpp.llama_cpp_ext`` directly (docs/architecture.md#the-llamacpp-backend). This module is the
facade that implements :class:`DecodeBackend`; the work is in rooms of their own:

- :mod:`.model` loads the GGUF (``load_mtp`` only when ``{arch}.nextn_predict_layers`` says the
  file has a head: an MTP context on a model loaded without it aborts the process) and makes the
  contexts; :mod:`.contexts` wraps one context (decode, logits and hidden rows, memory, states);
- :mod:`.vocab` is the vocabulary, the chat template and the grammar tokenizer;
- :mod:`.drafter` is what drafts: :mod:`.mtp_head` the model's own MTP head, or
  :mod:`.gemma4_assistant` a separate drafter model (Gemma 4's assistant, docs/drafters.md) found
  beside the model or named by ``LoadSettings.drafter``, whose context reads the target's cache;
- :mod:`.kept_states` keeps states between requests for prefix reuse, per lane;
- :mod:`.decode` runs requests: prefill, step, draft, verify, rollback;
- :mod:`.image_input` holds a vision model's projector (:mod:`.images`) and the images prepared
  for the next prefill (docs/vision.md).

The target context keeps ``n_rs_seq`` recurrent-state snapshots so a hybrid (gated-delta-net) trunk
can be rolled back by up to the maximum draft depth. Both the target and the MTP head's context
export the hidden state of every row (``llama_set_embeddings_nextn(ctx, True, False)``). Masked
export (``masked=True``) looks right for the draft, but in this llama.cpp the MTP graph's masked
export copies the *first* n_outputs rows of the batch, which is the wrong row as soon as a batch
carries queued rows before the drafting row (checked: for a 3-row batch whose last row is the
output, the masked export holds row 0's state); unmasked export has every row at its batch index.

A model without an MTP head of its own keeps only the window in its sliding-window layers
(``swa_full`` off, as llama-server runs them: the whole context's KV for every sliding layer
otherwise) and so, like a recurrent trunk, resumes a prompt further back than the window only
from a checkpoint (:mod:`.kept_states`); rolling back a few rejected drafts stays a plain trim.

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

from app.engine.drafter.facts import DRAFTER_REASON, is_drafter_architecture
from app.engine.drafter.pairing import DrafterMatch, choose_drafter, may_take_drafter
from app.engine.errors import RuntimeBackendError
from app.engine.load_options import LoadOptions, load_options_problem
from app.engine.runtime.backends.gguf_info import GgufSummary, read_gguf_summary
from app.engine.runtime.backends.llama_cpp.batch import NumpyBatch
from app.engine.runtime.backends.llama_cpp.contexts import LlamaContext
from app.engine.runtime.backends.llama_cpp.decode import Decoder
from app.engine.runtime.backends.llama_cpp.drafter import Drafter
from app.engine.runtime.backends.llama_cpp.gemma4_assistant import open_gemma4_assistant
from app.engine.runtime.backends.llama_cpp.image_input import ImageInput
from app.engine.runtime.backends.llama_cpp.images import VisionProjector
from app.engine.runtime.backends.llama_cpp.kept_states import KeptLanes, Lane
from app.engine.runtime.backends.llama_cpp.model import (
    BACKEND_NAME,
    BATCH_SIZE,
    DEFAULT_CONTEXT,
    LlamaModel,
    cpu_variant_name,
    initialise_once,
    machine_fingerprint,
)
from app.engine.runtime.backends.llama_cpp.mtp_head import MtpHeadDrafter
from app.engine.runtime.backends.llama_cpp.sequences import open_sequences
from app.engine.runtime.backends.llama_cpp.thread_calibration import calibrated
from app.engine.runtime.backends.llama_cpp.vocab import LlamaVocab
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
from app.engine.runtime.core.cpu_threads import ThreadChoice, choose_threads


class LlamaCppBackend(DecodeBackend):
    """One GGUF loaded in llama.cpp, with an MTP draft context when the file has a nextn block."""

    def __init__(self, path: Path, settings: LoadSettings) -> None:
        summary = read_gguf_summary(path)
        initialise_once()
        self._path = Path(path)
        self._model: LlamaModel | None = None
        self._drafter_model: LlamaModel | None = None
        self._contexts: list[LlamaContext] = []
        self._images: ImageInput | None = None
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
                settings.threads,
            )
        )
        if problem is not None:
            raise RuntimeBackendError(problem)
        drafter_match = self._drafter_for(summary, settings)
        own_head = summary.mtp_unavailable_reason is None
        mtp_reason = self._mtp_reason(summary, drafter_match)
        model = self._model = LlamaModel(
            self._path, summary, load_mtp=own_head, gpu_layers=settings.gpu_layers
        )
        # The own head's cache takes no checkpoints: its model keeps every position (see above).
        self._swa_full = own_head
        self._vocab = LlamaVocab(model.vocab, model.vocab_size, summary.chat_template)
        trained = model.trained_context
        self._context_size = settings.context_length or min(
            DEFAULT_CONTEXT, trained or DEFAULT_CONTEXT
        )
        self._threads = _threads_for(model, settings)
        self._settings = settings
        self._sequences = _sequences(settings, drafter_match)
        depth = settings.max_draft_depth if mtp_reason is None else 0
        self._on_cpu_alone = self._threads.threads == 1 and (
            settings.gpu_layers == 0 or not llama_cpp.llama_supports_gpu_offload()
        )
        self._fingerprint = machine_fingerprint(
            self._threads, settings.gpu_layers, self.cycle_clock.__name__
        )
        target = self._new_context(rollback_depth=depth)
        batch = NumpyBatch(BATCH_SIZE, model.width)
        if drafter_match.path is not None:
            drafter, mtp_reason = self._open_separate_drafter(drafter_match.path, target)
        else:
            drafter, mtp_reason = self._open_drafter(target, batch, mtp_reason)
        drafter_path = drafter_match.path if drafter is not None else None
        images_reason = self._open_projector(settings)
        self.info = ModelInfo(
            path=self._path,
            backend=BACKEND_NAME,
            architecture=summary.architecture,
            vocab_size=model.vocab_size,
            context_length=target.size,
            embedding_length=model.width,
            mtp_layers=self._drafter_layers() if drafter_path else summary.nextn_layers,
            max_draft_depth=depth if mtp_reason is None else 0,
            mtp_unavailable_reason=mtp_reason,
            has_chat_template=summary.chat_template is not None,
            threads=self._threads,
            projector=settings.projector if self._images is not None else None,
            images_unavailable_reason=images_reason,
            drafter=drafter_path,
            cpu_variant=cpu_variant_name(),
            sequences=self._sequences,
        )
        drafting = Lane("drafting", target, drafter, self._zero_hidden())
        kept = KeptLanes(
            settings.state_cache_mib * 1024 * 1024,
            recurrent=model.recurrent or (model.sliding_window > 0 and not self._swa_full),
            model_name=self._path.name,
        )
        plain = drafting if depth == 0 else None  # no snapshots anyway: share the one context
        self._decoder = Decoder(
            self.info, drafting, plain, self._open_plain_lane, kept, batch, self._images
        )
        self._batch = batch
        self._last_reuse = PrefixReuse()
        self._warm_up()
        if self._sequences > 1:
            head = drafter.context if isinstance(drafter, MtpHeadDrafter) else None
            self.sequence_backends = open_sequences(
                self, target, head, count=self._sequences, kept=kept
            )

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
            swa_full=self._swa_full,
            sequences=self._sequences,
        )
        self._contexts.append(context)
        return context

    def _drafter_for(self, summary: GgufSummary, settings: LoadSettings) -> DrafterMatch:
        """The separate drafter this model drafts with (checked against it, one line when it
        does not fit), or none: a model with its own MTP head looks for none."""
        if is_drafter_architecture(summary.architecture):
            raise RuntimeBackendError(
                DRAFTER_REASON.format(name=self._path.name, architecture=summary.architecture)
            )
        if settings.drafter is None and (
            summary.nextn_layers > 0 or not may_take_drafter(summary.architecture)
        ):
            return DrafterMatch(None)
        return choose_drafter(self._path, settings.drafter)

    def _mtp_reason(self, summary: GgufSummary, match: DrafterMatch) -> str | None:
        """Why the model cannot draft (None: its own head or a drafter will)."""
        if match.path is not None:
            return None
        if summary.nextn_layers == 0 and may_take_drafter(summary.architecture):
            return match.note or (
                f"{self._path.name} drafts with a separate drafter model and none was found "
                "beside it (a gemma4-assistant GGUF in its folder or an MTP/ subfolder), so "
                "decoding runs autoregressively; pass --drafter FILE to name one"
            )
        return summary.mtp_unavailable_reason

    def _open_separate_drafter(
        self, path: Path, target: LlamaContext
    ) -> tuple[Drafter | None, str | None]:
        """The drafter model at ``path`` bound to ``target``, or None and why not."""
        try:
            self._drafter_model, drafter = open_gemma4_assistant(
                path,
                target,
                beside=self._model,
                threads=self._threads,
                kv_cache_type=self._settings.kv_cache_type,
                flash_attention=self._settings.flash_attention,
                swa_full=self._swa_full,
                gpu_layers=self._settings.gpu_layers,
            )
        except RuntimeBackendError as exc:
            return None, f"{exc}; decoding runs autoregressively"
        self._contexts.append(drafter.context)
        return drafter, None

    def _drafter_layers(self) -> int:
        assert self._drafter_model is not None
        return llama_cpp.llama_model_n_layer_nextn(self._drafter_model.pointer)

    def _open_drafter(
        self, target: LlamaContext, batch: NumpyBatch, mtp_reason: str | None
    ) -> tuple[Drafter | None, str | None]:
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

    def _open_projector(self, settings: LoadSettings) -> str | None:
        """Load the vision projector the settings name; None, or why the model reads no images."""
        assert self._model is not None
        if settings.projector is None:
            if not settings.images:
                return f"{self._path.name} was loaded for text only (images turned off)"
            return (
                f"{self._path.name} has no vision projector (no mmproj-*.gguf beside the model "
                "file), so it cannot read images; --mmproj FILE names one"
            )
        projector = VisionProjector(
            settings.projector,
            self._model.pointer,
            threads=self._threads.batch_threads,  # the encoder runs whole images, as a batch
            use_gpu=settings.gpu_layers != 0 and llama_cpp.llama_supports_gpu_offload(),
            image_max_tokens=settings.image_max_tokens,
        )
        self._images = ImageInput(projector)
        return None

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
        if self._images is not None:
            self._images.close()
            self._images = None
        for context in reversed(self._contexts):
            context.close()
        self._contexts = []
        for model in (self._drafter_model, self._model):
            if model is not None:
                model.close()
        self._model = self._drafter_model = None

    # --- text -------------------------------------------------------------------------------

    def tokenize(self, text: str, *, parse_special: bool) -> list[int]:
        return self._vocab.tokenize(text, parse_special=parse_special)

    def token_bytes(self, token: int) -> bytes:
        return self._vocab.token_bytes(token)

    def token_text(self, token: int) -> str:
        return self._vocab.token_text(token)

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
    def image_marker(self) -> str | None:
        return self._images.marker if self._images is not None else None

    def tokenize_with_images(self, text: str, images: Sequence[ImagePart]) -> list[int]:
        if self._images is None:
            return super().tokenize_with_images(text, images)
        return self._images.tokens(text, images, self._vocab.bos_token_id)

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
        self._last_reuse = PrefixReuse(
            start, len(tokens) - start, source if start else "", self._decoder.images_encoded
        )
        return logits

    def step(self, token: int) -> np.ndarray:
        return self._decoder.step(token)

    def draft(self, last_token: int, depth: int, choose: DraftChooser) -> DraftResult:
        return self._decoder.draft(last_token, depth, choose)

    def verify(self, tokens: Sequence[int]) -> VerifyResult:
        return self._decoder.verify(tokens)

    def rollback(self, committed_length: int) -> None:
        self._decoder.rollback(committed_length)


def _threads_for(model: LlamaModel, settings: LoadSettings) -> ThreadChoice:
    """The threads asked for, or llama.cpp's default measured against fewer
    (:mod:`.thread_calibration`) when the model computes on the CPU."""
    chosen = choose_threads(settings.threads)
    on_gpu = settings.gpu_layers != 0 and llama_cpp.llama_supports_gpu_offload()
    if settings.threads > 0 or on_gpu:
        return chosen
    return calibrated(model.path, model.pointer, chosen)


def _sequences(settings: LoadSettings, drafter: DrafterMatch) -> int:
    """How many sequences the model's contexts hold: several share the target and the MTP
    head's context, not a separate drafter's, nor a projector's image evaluation (those run one
    request at a time)."""
    if drafter.path is not None or settings.projector is not None:
        return 1
    return max(1, settings.sequences)
