"""The context window a model gets when the user sets none: the largest that fits the machine.

A flat 4,096 tokens wastes a machine with plenty of memory and can still be too much for a small
one. So the context is chosen from the memory estimate (:mod:`memory`): the candidates are
2,048 tokens, doubling, up to the model's trained context (and that context itself); the chosen
one is the largest whose whole estimate — weights, KV cache at the chosen type, recurrent states,
compute buffers and the kept-state budget — stays within :data:`FIT_SHARE` of the machine's RAM
(the model bar's "fits" hint). Above :data:`USUAL_MAX_CONTEXT` only while the whole stays within
:data:`PLENTIFUL_SHARE`: a longer window is memory every load pays for. When even the smallest
does not fit, the smallest is used (and the model bar says it does not fit); when the machine's
memory is unknown, the runtime's default. A context the user sets is used as it is.

RAM is the measure, as for the model bar's hint: on Apple silicon it is what the GPU uses too;
with a discrete GPU the weights may live in its memory instead, so the choice is cautious there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.engine.chat.memory import (
    MemoryEstimate,
    ModelShape,
    chat_context,
    estimate_memory,
    physical_memory_bytes,
)
from app.engine.chat.model_files import GGUF, ModelDescription
from app.engine.load_options import LoadOptions
from app.engine.runtime.core.backend import LoadSettings

if TYPE_CHECKING:
    from app.engine.settings import Settings

QUANT_BLOCK = 32
"""Values per q8_0 / q4_0 block: a quantised KV cache needs heads a multiple of it wide."""
MIN_AUTO_CONTEXT = 2048
USUAL_MAX_CONTEXT = 32768
FIT_SHARE = 0.6
PLENTIFUL_SHARE = 0.3


@dataclass(frozen=True)
class ContextChoice:
    """The context to load with and why (shown beside the memory estimate)."""

    context: int
    reason: str


def choose_context(
    weights_bytes: int,
    shape: ModelShape,
    *,
    with_mtp: bool,
    kv_cache_type: str,
    state_cache_mib: int,
    memory_bytes: int | None,
    requested: int = 0,
) -> ContextChoice:
    """The context for ``requested`` (0: the largest that fits ``memory_bytes`` of RAM)."""
    if requested > 0:
        return ContextChoice(requested, "set in the load options")
    if memory_bytes is None:
        context = chat_context(shape.trained_context)
        return ContextChoice(context, "the machine's memory is unknown")
    trained = shape.trained_context or chat_context(0)

    def share(context: int) -> float:
        estimate = estimate_memory(
            weights_bytes,
            shape,
            with_mtp=with_mtp,
            context=context,
            kv_cache_type=kv_cache_type,
            state_cache_mib=state_cache_mib,
        )
        return estimate.total_bytes / memory_bytes

    candidates = _candidates(trained)
    limits = [FIT_SHARE if c <= USUAL_MAX_CONTEXT else PLENTIFUL_SHARE for c in candidates]
    fitting = [c for c, limit in zip(candidates, limits, strict=True) if share(c) <= limit]
    if not fitting:
        return ContextChoice(candidates[0], "the smallest; even it does not fit this machine")
    context = fitting[-1]
    if context == trained:
        return ContextChoice(context, "the model's trained context, which fits this machine")
    return ContextChoice(context, "the largest that fits this machine")


def _candidates(trained: int) -> list[int]:
    """2,048 tokens doubling up to ``trained``, and ``trained`` itself (alone when smaller)."""
    candidates = []
    context = MIN_AUTO_CONTEXT
    while context < trained:
        candidates.append(context)
        context *= 2
    return [*candidates, trained]


def kv_type_problem(model: ModelDescription, kv_cache_type: str) -> str | None:
    """Why llama.cpp would refuse ``kv_cache_type`` for ``model`` (None: it would not)."""
    if kv_cache_type == "f16" or model.kind != GGUF or model.shape is None:
        return None
    widths = sorted({model.shape.key_length, model.shape.value_length})
    if all(width % QUANT_BLOCK == 0 for width in widths):
        return None
    wide = " and ".join(str(width) for width in widths)
    return (
        f"{model.name}'s attention heads are {wide} values wide, not a multiple of "
        f"{kv_cache_type}'s {QUANT_BLOCK}-value blocks"
    )


@dataclass(frozen=True)
class LoadPlan:
    """A model's load settings with the memory they are estimated to take."""

    settings: LoadSettings
    choice: ContextChoice
    memory: MemoryEstimate | None
    """None when the model's shape could not be read (the backend then decides the context)."""
    kv_note: str | None = None
    """Why the chosen KV cache type is not used for this model (it gets f16 instead)."""


def plan_load(
    model: ModelDescription,
    options: LoadOptions,
    *,
    memory_bytes: int | None,
    max_draft_depth: int = LoadSettings().max_draft_depth,
) -> LoadPlan:
    """The settings to load ``model`` with under ``options`` on a machine with ``memory_bytes``
    of RAM (None: unknown)."""
    kv_note = kv_type_problem(model, options.kv_cache_type)
    load_kv_type = "f16" if kv_note else options.kv_cache_type
    # MLX runs its own (bf16) cache: the KV type is llama.cpp's.
    kv_type = load_kv_type if model.kind == GGUF else "f16"
    with_mtp = model.mtp_blocks > 0 and model.mtp_note is None
    weights = model.size_bytes + model.drafter_bytes
    memory = None
    if model.shape is None:
        requested = options.context_length
        choice = ContextChoice(requested, "set in the load options" if requested else "")
    else:
        choice = choose_context(
            weights,
            model.shape,
            with_mtp=with_mtp,
            kv_cache_type=kv_type,
            state_cache_mib=options.state_cache_mib,
            memory_bytes=memory_bytes,
            requested=options.context_length,
        )
        memory = estimate_memory(
            weights,
            model.shape,
            with_mtp=with_mtp,
            context=choice.context,
            kv_cache_type=kv_type,
            state_cache_mib=options.state_cache_mib,
        )
    settings = LoadSettings(
        context_length=choice.context,
        threads=options.threads,
        max_draft_depth=max_draft_depth,
        kv_cache_type=load_kv_type,
        flash_attention=options.flash_attention,
        state_cache_mib=options.state_cache_mib,
        drafter=model.drafter,
    )
    return LoadPlan(settings, choice, memory, kv_note)


def load_settings_for(
    model: ModelDescription, settings: Settings, *, memory_bytes: int | None = None
) -> LoadSettings:
    """What the chat window loads ``model`` with: the user's saved load options, the context
    chosen for this machine (``memory_bytes`` None: the machine's RAM). Reads no file."""
    memory = memory_bytes if memory_bytes is not None else physical_memory_bytes()
    return plan_load(model, settings.load_options, memory_bytes=memory).settings
