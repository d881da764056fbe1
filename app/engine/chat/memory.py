"""How much memory a model will take once loaded for chat, estimated before loading it.

Desktop LLM apps are often blamed for wrong memory estimates, usually because they show the file
size alone. Loaded for chat with MTP, a model also holds:

- the KV cache of every full-attention layer for the whole context (keys and values in the
  chosen KV cache type: f16, or q8_0 / q4_0 at about 53 % / 28 % of its size);
- for hybrid models (gated-delta-net / SSM layers) a recurrent state per layer, kept once plus
  one snapshot per draft position so a rejected draft can be rolled back;
- the MTP draft context's own KV cache for the nextn block(s);
- compute buffers, dominated by one batch of logits (batch × vocabulary, F32) per context;
- the states kept between requests for prefix reuse, counted at their whole budget.

The figures follow how the runtime loads a model (512-token batches, four draft snapshots; with
no context given, the backend's min(4096, trained)).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from app.engine.load_options import KV_BYTES_PER_ELEMENT
from app.engine.units import format_bytes

RUNTIME_DEFAULT_CONTEXT = 4096
"""The context the runtime gives a model when none is set (llama_cpp.model.DEFAULT_CONTEXT)."""
RUNTIME_BATCH = 512
RUNTIME_DRAFT_SNAPSHOTS = 4
_F32 = 4
_MIB = 1 << 20
_COMPUTE_ACTIVATIONS_PER_ROW = 6
"""Hidden-width F32 vectors per batch row held by the graph's scratch besides the logits."""


@dataclass(frozen=True)
class ModelShape:
    """The figures of a model's architecture that decide its memory beyond the weights."""

    trained_context: int
    embedding_length: int
    vocab_size: int
    attention_layers: int
    kv_heads: int
    key_length: int
    value_length: int
    recurrent_layers: int = 0
    recurrent_state_bytes: int = 0
    """Bytes of one recurrent layer's state (conv + SSM state), F32."""
    mtp_layers: int = 0


@dataclass(frozen=True)
class MemoryEstimate:
    weights_bytes: int
    kv_bytes: int
    """The attention KV caches (trunk and MTP head) for ``context`` tokens."""
    recurrent_bytes: int
    """Recurrent-layer states and their draft snapshots (independent of the context)."""
    compute_bytes: int
    context: int
    kv_cache_type: str = "f16"
    kept_state_bytes: int = 0
    """The budget for states kept between requests."""

    @property
    def cache_bytes(self) -> int:
        return self.kv_bytes + self.recurrent_bytes

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.cache_bytes + self.compute_bytes + self.kept_state_bytes


def chat_context(trained_context: int) -> int:
    return min(RUNTIME_DEFAULT_CONTEXT, trained_context or RUNTIME_DEFAULT_CONTEXT)


def estimate_memory(
    weights_bytes: int,
    shape: ModelShape,
    *,
    with_mtp: bool,
    context: int = 0,
    kv_cache_type: str = "f16",
    state_cache_mib: int = 0,
) -> MemoryEstimate:
    """Memory for chat with a ``context``-token window (0: the runtime's default) whose KV cache
    holds ``kv_cache_type`` elements, plus ``state_cache_mib`` MiB of kept states."""
    context = context or chat_context(shape.trained_context)
    element = KV_BYTES_PER_ELEMENT[kv_cache_type]
    kv_per_token_layer = shape.kv_heads * (shape.key_length + shape.value_length) * element
    kv_layers = shape.attention_layers
    snapshots = RUNTIME_DRAFT_SNAPSHOTS if with_mtp else 0
    recurrent = shape.recurrent_layers * shape.recurrent_state_bytes * (1 + snapshots)
    contexts = 1
    if with_mtp and shape.mtp_layers:
        kv_layers += shape.mtp_layers
        contexts = 2
    per_row = (shape.vocab_size + _COMPUTE_ACTIVATIONS_PER_ROW * shape.embedding_length) * _F32
    return MemoryEstimate(
        weights_bytes=weights_bytes,
        kv_bytes=round(context * kv_layers * kv_per_token_layer),
        recurrent_bytes=recurrent,
        compute_bytes=contexts * RUNTIME_BATCH * per_row,
        context=context,
        kv_cache_type=kv_cache_type,
        kept_state_bytes=state_cache_mib * _MIB,
    )


def physical_memory_bytes() -> int | None:
    """The machine's RAM, or None where the platform does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def fits_text(estimate: MemoryEstimate, memory_bytes: int | None) -> str:
    """A "fits your machine" hint against the machine's RAM."""
    if memory_bytes is None:
        return "the machine's memory is unknown"
    share = estimate.total_bytes / memory_bytes
    ram = format_bytes(memory_bytes)
    if share <= 0.6:
        return f"fits in {ram} RAM"
    if share <= 0.9:
        return f"tight: {share:.0%} of {ram} RAM; close other programs"
    return f"does not fit in {ram} RAM; pick a smaller quantisation"
