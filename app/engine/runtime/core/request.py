"""What a caller asks for and what it gets back: plain, picklable values.

These cross the process boundary between the GUI/CLI and the inference worker, so they are
frozen dataclasses of plain data, defined once and shared by both sides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.chat_format.constraint import OutputConstraint
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.chat_format.tools import ToolChoice, ToolSpec
from app.engine.runtime.core.stats import DecodeStats
from app.engine.runtime.sampling.acceptance import AcceptMode
from app.engine.runtime.sampling.logprobs import MAX_TOP_LOGPROBS, TokenLogprob
from app.engine.runtime.sampling.sampler import SamplerSettings

MAX_DRAFT_DEPTH = 8


def check_mtp_depth(depth: int) -> None:
    """Raise a clear error unless 0 ≤ ``depth`` ≤ :data:`MAX_DRAFT_DEPTH`."""
    if not 0 <= depth <= MAX_DRAFT_DEPTH:
        raise RuntimeBackendError(
            f"MTP depth {depth} is invalid: use 0 (plain decoding) to {MAX_DRAFT_DEPTH}; "
            "2–3 is usually fastest"
        )


@dataclass(frozen=True)
class GenerationRequest:
    """Chat ``messages`` (rendered with the model's template) or a raw ``prompt``, not both.

    ``mtp_depth`` 0 is plain autoregressive decoding; K ≥ 1 drafts K tokens per cycle with the
    model's MTP head, accepted by ``accept`` (Leviathan–Chen or sample-and-compare). With
    ``adaptive_depth`` the depth is chosen before each cycle from the request's own measurements
    (``depth_policy``), from 0 to ``mtp_depth``. With ``stop_unsure_drafts`` a cycle's draft
    ends early at a token the head is unsure of, when measured acceptance and costs say it would
    not pay (``draft_confidence``).

    ``tools`` are offered to the model through its chat template; ``tool_choice`` required or a
    named function forces one call whose arguments match the tool's schema. ``constraint``
    makes the whole reply match a grammar (a JSON schema); drafts are held to it too.

    A conversation whose last message is the assistant's (without tool calls) is continued:
    the reply goes on from its text (a prefill). ``template_variables`` are handed to the chat
    template beside the messages (``reasoning_effort`` for a template that reads it).

    ``logprobs`` None reports no log-probabilities; k ≥ 0 reports each token's, and the k
    likeliest tokens at its position (:mod:`~app.engine.runtime.sampling.logprobs`).
    ``min_tokens``: the end-of-generation tokens are held back until the reply has that many;
    ``ignore_eos``: always (:mod:`~app.engine.runtime.chat_format.end_tokens`).
    """

    messages: tuple[ChatMessage, ...] = ()
    prompt: str | None = None
    max_tokens: int = 256
    sampler: SamplerSettings = field(default_factory=SamplerSettings)
    mtp_depth: int = 2
    accept: AcceptMode = AcceptMode.LEVIATHAN_CHEN
    adaptive_depth: bool = False
    stop_unsure_drafts: bool = False
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice = field(default_factory=ToolChoice)
    constraint: OutputConstraint | None = None
    trim_history: bool = False
    """Leave out the oldest turns when the conversation no longer fits the context
    (:mod:`~app.engine.runtime.speculative.history_fit`) instead of failing."""
    template_variables: tuple[tuple[str, str], ...] = ()
    logprobs: int | None = None
    min_tokens: int = 0
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        if bool(self.messages) == (self.prompt is not None):
            raise RuntimeBackendError("a request needs either chat messages or a raw prompt")
        if self.max_tokens < 1:
            raise RuntimeBackendError(f"max tokens {self.max_tokens} is invalid: use 1 or more")
        check_mtp_depth(self.mtp_depth)
        if self.logprobs is not None and not 0 <= self.logprobs <= MAX_TOP_LOGPROBS:
            raise RuntimeBackendError(
                f"top log-probabilities {self.logprobs} is invalid: use 0 to {MAX_TOP_LOGPROBS}"
            )
        if self.min_tokens < 0:
            raise RuntimeBackendError(f"min tokens {self.min_tokens} is invalid: use 0 or more")
        if self.tool_choice.forces_call and not self.tools:
            raise RuntimeBackendError("a tool call is required but the request offers no tools")
        if self.tool_choice.forces_call and self.constraint is not None:
            raise RuntimeBackendError(
                "a request cannot both force a tool call and constrain its reply to a grammar"
            )


@dataclass(frozen=True)
class TokenChunk:
    """Tokens committed by one cycle (or one plain step), their text, the stats so far, and the
    tokens' log-probabilities when the request asked for them."""

    token_ids: tuple[int, ...]
    text: str
    stats: DecodeStats
    logprobs: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True)
class GenerationResult:
    """A finished request. ``finish_reason``: stop, length, context or cancelled.

    ``seed`` is the sampling seed used (drawn at random when the request gave none), so any
    answer can be reproduced.

    ``note`` explains a fallback the user should know about (e.g. no MTP block → plain decoding).

    ``kept_state_bytes``: memory the backend holds after this request for later prompts that
    share a prefix (checkpoints and saved conversations; :attr:`DecodeBackend.kept_state_bytes`).
    """

    text: str
    token_ids: tuple[int, ...]
    prompt_token_count: int
    finish_reason: str
    stats: DecodeStats
    seed: int
    note: str | None = None
    kept_state_bytes: int = 0
    logprobs: tuple[TokenLogprob, ...] = ()
    """One entry per token of ``token_ids`` when the request asked for log-probabilities."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "token_ids": list(self.token_ids),
            "prompt_tokens": self.prompt_token_count,
            "finish_reason": self.finish_reason,
            "seed": self.seed,
            "note": self.note,
            "kept_state_bytes": self.kept_state_bytes,
            "stats": self.stats.to_dict(),
        }
