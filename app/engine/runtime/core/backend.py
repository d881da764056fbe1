"""The contract between the backend-agnostic decoding loop and an inference backend.

The speculative cycle (draft with the MTP head, verify in one batch, accept, roll back) is the
same for every backend; only how a forward pass runs differs. Keeping the interface this small
lets the MLX backend implement it next without touching the loop or its exactness tests.

Positions: the backend's trunk holds ``committed_length`` tokens. The most recent sampled token
("last") is never in the trunk yet: ``verify`` (or ``step``) feeds it together with what follows.
The backend also keeps what the MTP head needs (the trunk's hidden state for the last committed
position and the head's own cache); ``rollback`` decides which verified rows become committed.

A model that reads images takes them in the prompt: an image counts as the KV cells it fills
(``committed_length`` and the context window count cells), while the backend keeps the positions
apart (an image may advance the position by fewer than its cells; docs/vision.md).
"""

from __future__ import annotations

import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from app.engine.errors import RuntimeBackendError
from app.engine.load_options import DEFAULT_STATE_CACHE_MIB
from app.engine.runtime.core.cpu_threads import ThreadChoice

if TYPE_CHECKING:  # imported by the backends that build one, on first use
    import llguidance

    from app.engine.runtime.chat_format.images import ImagePart


@dataclass(frozen=True)
class LoadSettings:
    """How a backend loads a model.

    ``context_length`` 0 → min(4096, the model's trained context); ``threads`` 0 → what
    llama.cpp's own tools use: the physical performance cores for a step, every physical core for
    a prompt's batches (:func:`~app.engine.runtime.core.cpu_threads.choose_threads`), N → N for
    both; ``max_draft_depth`` bounds the MTP
    depth a request may use (hybrid models keep that many recurrent-state snapshots for
    rollback); ``gpu_layers`` −1 → all when the build has a GPU backend.
    """

    context_length: int = 0
    threads: int = 0
    max_draft_depth: int = 4
    gpu_layers: int = -1
    kv_cache_type: str = "f16"
    """The attention KV cache's element type: ``f16``, ``q8_0`` or ``q4_0`` (llama.cpp)."""
    flash_attention: str = "auto"
    """``auto``, ``on`` or ``off`` (llama.cpp; a quantised V cache needs it on)."""
    state_cache_mib: int = DEFAULT_STATE_CACHE_MIB
    """Memory for the states kept between requests (checkpoints inside a conversation and
    whole saved conversations) so a later prompt that shares a prefix prefills only the rest."""
    projector: Path | None = None
    """The vision projector (``mmproj-*.gguf``) loaded with the model; None: no images. The
    client fills it in from beside the model (``--mmproj FILE`` names another) unless
    ``images`` is False."""
    images: bool = True
    """Look for the projector beside the model when none is named (False: text only)."""
    image_max_tokens: int | None = None
    """At most this many tokens per image (None: the projector's own limit)."""
    drafter: Path | None = None
    """A separate drafter model to draft with (Gemma 4's assistant: a GGUF for a GGUF model, a
    folder for a model folder; docs/drafters.md), checked against the model before anything
    loads. None: the drafter found beside the model (its folder or an ``MTP/`` subfolder), if
    any, for a model that takes one."""
    sequences: int = 1
    """Requests decoded at once in one context (``serve --parallel N``; llama.cpp only: N
    sequences with continuous batching, docs/server-api.md#several-clients). 1 elsewhere."""


@dataclass(frozen=True)
class ModelInfo:
    """What a loaded model offers. ``mtp_unavailable_reason`` is None when MTP can run;
    ``cpu_variant`` names the CPU code a portable llama.cpp build picked (None: native code, or
    another backend)."""

    path: Path
    backend: str
    architecture: str
    vocab_size: int
    context_length: int
    embedding_length: int
    mtp_layers: int
    max_draft_depth: int
    mtp_unavailable_reason: str | None
    has_chat_template: bool
    threads: ThreadChoice | None = None
    """The CPU threads the backend runs with (None where it does not choose them: MLX)."""
    projector: Path | None = None
    """The vision projector loaded with the model (None: it reads no images)."""
    images_unavailable_reason: str | None = None
    """Why the model reads no images (one line for the user), when it does not."""
    drafter: Path | None = None
    """The separate drafter model that drafts for it (None: its own MTP head, or none)."""
    cpu_variant: str | None = None
    """The CPU code a portable llama.cpp build picked (None: native code, or another backend)."""
    sequences: int = 1
    """Requests the model decodes at once (``LoadSettings.sequences`` where the backend can)."""

    @property
    def mtp_available(self) -> bool:
        return self.mtp_unavailable_reason is None

    @property
    def reads_images(self) -> bool:
        return self.projector is not None

    def require_room(self, held: int, more: int) -> None:
        """Refuse ``more`` tokens after ``held`` when they would not fit the context window."""
        if held + more > self.context_length:
            raise RuntimeBackendError(
                f"the context window of {self.path.name} ({self.context_length} tokens) is "
                "full; start a new conversation or load the model with a larger context (--ctx)"
            )


@dataclass(frozen=True)
class DraftResult:
    """The K drafted tokens (the head's logits row of each was handed to the chooser)."""

    tokens: tuple[int, ...]


@dataclass(frozen=True)
class VerifyResult:
    """The trunk's logits and (post-norm) hidden state for every verified row: a backend may
    hand out views of its own buffers, valid until it decodes again (copy what you keep)."""

    logits: np.ndarray
    hidden: np.ndarray


@dataclass(frozen=True)
class PrefixReuse:
    """How the last prefill started: prompt tokens whose state was kept from earlier requests
    (``reused_tokens``) and tokens run through the model (``computed_tokens``).

    ``source``: ``""`` nothing was reused, ``"live"`` the state the previous request left,
    ``"checkpoint"`` a state kept inside the conversation (recurrent layers cannot be rewound,
    so a divergence resumes from the nearest checkpoint before it), ``"trimmed"`` the live state
    cut back (attention-only models), ``"saved"`` a whole state kept when another conversation
    took the model.
    """

    reused_tokens: int = 0
    computed_tokens: int = 0
    source: str = ""
    images_encoded: int = 0
    """Images run through the vision encoder (an image in the reused prefix is not)."""


DraftChooser = Callable[[int, np.ndarray], int]
"""Called by :meth:`DecodeBackend.draft` with (depth index, logits row); returns the draft token,
or :data:`STOP_DRAFTING` to end the draft before this row (fewer drafts than the depth asked).
The row may be a view of the backend's buffer, valid during the call only (copy what you keep)."""

STOP_DRAFTING = -1


class DecodeBackend(ABC):
    """One loaded model that can prefill, step, draft with its MTP head, verify and roll back."""

    info: ModelInfo

    # --- text -------------------------------------------------------------------------------

    @abstractmethod
    def tokenize(self, text: str, *, parse_special: bool) -> list[int]:
        """Token ids for ``text`` (no BOS added); ``parse_special`` maps control-token text."""

    @abstractmethod
    def token_bytes(self, token: int) -> bytes:
        """The bytes a token stands for; empty for control/special tokens (never shown)."""

    @abstractmethod
    def token_text(self, token: int) -> str:
        """A token as shown to a person: its bytes as text, or a control/special token's own
        name (``<|im_end|>``); what log-probability alternatives show."""

    @abstractmethod
    def is_end_of_generation(self, token: int) -> bool:
        """True for end-of-turn / end-of-text tokens."""

    @property
    @abstractmethod
    def chat_template(self) -> str | None:
        """The model's Jinja chat template, if it ships one."""

    @property
    @abstractmethod
    def special_token_texts(self) -> dict[str, str]:
        """``bos_token`` / ``eos_token`` texts for the chat template (empty string if none)."""

    @property
    @abstractmethod
    def bos_token_id(self) -> int | None:
        """The token a prompt must start with (BOS), or None when the model adds none."""

    @property
    def image_marker(self) -> str | None:
        """What stands for an image in a rendered prompt (None: the model reads no images)."""
        return None

    def tokenize_with_images(self, text: str, images: Sequence[ImagePart]) -> list[int]:
        """``text`` (special tokens parsed) with ``images`` at its :attr:`image_marker` places, as
        the cells a prefill takes: text token ids, and for each image one negative pseudo-id per
        cell it fills (``backends/image_cells.py``); BOS first when the model wants one."""
        raise RuntimeBackendError(
            self.info.images_unavailable_reason or f"{self.info.path.name} reads no images"
        )

    def plain_only_reason(self, tokens: Sequence[int]) -> str | None:
        """Why the prompt ``tokens`` decodes without drafts on this backend (None: it may
        draft), for the reply's note."""
        return None

    def grammar_tokenizer(self) -> llguidance.LLTokenizer:
        """The vocabulary as llguidance sees it (built once, then kept), for constrained
        decoding; end-of-generation tokens are its end tokens."""
        raise RuntimeBackendError(
            f"the {self.info.backend} backend cannot enforce a JSON schema or a tool call; "
            "use the llama.cpp backend"
        )

    @property
    def performance_fingerprint(self) -> str:
        """What decode speed depends on besides the model (machine, build, threads): the
        adaptive depth keeps what it learned per model and fingerprint."""
        return self.info.backend

    @property
    def compute_seconds(self) -> float:
        """Seconds spent inside the model's forward passes since the model was loaded (0.0
        where the backend does not measure them): decode time minus its growth is the host
        loop's own cost (:attr:`DecodeStats.host_seconds_per_token`)."""
        return 0.0

    @property
    def cycle_clock(self) -> Callable[[], float]:
        """The clock the adaptive depth times cycles with: wall time, unless the backend knows
        a clock that other work on the machine does not advance and that still sees all of a
        cycle's work."""
        return time.perf_counter

    # --- decoding ---------------------------------------------------------------------------

    @property
    @abstractmethod
    def committed_length(self) -> int:
        """Tokens held in the trunk's state."""

    @abstractmethod
    def reset(self) -> None:
        """Forget every token and every kept state: the next prefill computes from scratch."""

    @abstractmethod
    def prefill(
        self, tokens: Sequence[int], *, with_mtp: bool, keep_at: Sequence[int] = ()
    ) -> np.ndarray:
        """Feed the prompt; return the logits row of its last token.

        With ``with_mtp`` the MTP head's cache and pending hidden state are prepared too. The
        longest prefix of ``tokens`` whose state the backend still holds (from the previous
        request, a checkpoint or a saved conversation) is reused and only the rest is run; the
        result is the one a fresh prefill gives. :attr:`last_prefix_reuse` says what was reused.
        After :meth:`reset` nothing is reused. ``keep_at``: lengths worth a checkpoint where a
        backend needs checkpoints to resume (where the last user message starts, so editing it
        resumes there).
        """

    def reusable_prefix(self, tokens: Sequence[int], *, with_mtp: bool) -> int:
        """How many tokens of ``tokens`` a :meth:`prefill` with ``with_mtp`` would reuse now
        (a backend may keep drafting and plain requests' states apart)."""
        return 0

    @property
    def last_prefix_reuse(self) -> PrefixReuse:
        """What the last :meth:`prefill` reused."""
        return PrefixReuse()

    @property
    def kept_state_bytes(self) -> int:
        """Memory held by states kept for later prompts (checkpoints, saved conversations)."""
        return 0

    @abstractmethod
    def step(self, token: int) -> np.ndarray:
        """Plain decoding: commit one token, return the next logits row — possibly a view of the
        backend's buffer, valid until it decodes again (the loop samples from it at once; copy
        a row you keep). :meth:`prefill`'s row is the caller's own.

        After a prefill ``with_mtp`` the head's input for the token is kept, not decoded: the
        next :meth:`draft` catches the head's cache up in one batch, so a stretch of steps
        between drafting cycles costs what plain decoding costs.
        """

    @abstractmethod
    def draft(self, last_token: int, depth: int, choose: DraftChooser) -> DraftResult:
        """Run the MTP head ``depth`` times from ``last_token``; ``choose`` picks each draft.

        ``depth`` 0 drafts nothing but brings the head's cache up to the committed tokens, so a
        cycle without drafts costs what it really costs (the adaptive depth compares them).
        """

    @abstractmethod
    def verify(self, tokens: Sequence[int]) -> VerifyResult:
        """Feed [last, d_1..d_K] to the trunk in one batch; logits and hidden for every row."""

    @abstractmethod
    def rollback(self, committed_length: int) -> None:
        """Keep the first ``committed_length`` tokens, drop the rest of the last verify.

        The verified rows that stay become the MTP head's next inputs (with their hidden states).
        """

    sequence_backends: tuple[DecodeBackend, ...] = ()
    """A model loaded for several sequences at once (``LoadSettings.sequences``): one backend
    per sequence, whose requests run at the same time; empty: one request at a time here."""

    def running(self) -> contextlib.AbstractContextManager[None]:
        """Held while a request runs here: a sequence of a model that decodes several at once
        joins every step for that time (:mod:`..backends.llama_cpp.sequences`)."""
        return contextlib.nullcontext()

    @abstractmethod
    def close(self) -> None:
        """Free native resources."""
