"""How much memory a model will take once loaded for chat, estimated before loading it.

Desktop LLM apps are often blamed for wrong memory estimates, usually because they show the file
size alone. Loaded for chat with MTP, a model also holds:

- the KV cache of every full-attention layer for the whole context (F16 keys and values);
- for hybrid models (gated-delta-net / SSM layers) a recurrent state per layer, kept once plus
  one snapshot per draft position so a rejected draft can be rolled back;
- the MTP draft context's own KV cache for the nextn block(s);
- compute buffers, dominated by one batch of logits (batch × vocabulary, F32) per context.

The figures follow how the runtime loads a model (``LoadSettings`` defaults: a context of
min(4096, trained), 512-token batches, four draft snapshots).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from app.engine.units import format_bytes

RUNTIME_DEFAULT_CONTEXT = 4096
"""The context the runtime gives a model when none is set (llama_cpp_backend.DEFAULT_CONTEXT)."""
RUNTIME_BATCH = 512
RUNTIME_DRAFT_SNAPSHOTS = 4
_F16 = 2
_F32 = 4
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
    cache_bytes: int
    compute_bytes: int
    context: int

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.cache_bytes + self.compute_bytes


def chat_context(trained_context: int) -> int:
    return min(RUNTIME_DEFAULT_CONTEXT, trained_context or RUNTIME_DEFAULT_CONTEXT)


def estimate_memory(weights_bytes: int, shape: ModelShape, *, with_mtp: bool) -> MemoryEstimate:
    """Memory for chat with the runtime's default load settings."""
    context = chat_context(shape.trained_context)
    kv_per_token_layer = shape.kv_heads * (shape.key_length + shape.value_length) * _F16
    cache = context * shape.attention_layers * kv_per_token_layer
    snapshots = RUNTIME_DRAFT_SNAPSHOTS if with_mtp else 0
    cache += shape.recurrent_layers * shape.recurrent_state_bytes * (1 + snapshots)
    contexts = 1
    if with_mtp and shape.mtp_layers:
        cache += context * shape.mtp_layers * kv_per_token_layer
        contexts = 2
    per_row = (shape.vocab_size + _COMPUTE_ACTIVATIONS_PER_ROW * shape.embedding_length) * _F32
    compute = contexts * RUNTIME_BATCH * per_row
    return MemoryEstimate(weights_bytes, cache, compute, context)


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
