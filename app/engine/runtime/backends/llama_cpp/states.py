"""Copy a llama.cpp context's sequence state into host memory and back.

Prefix reuse keeps two kinds of state: a *checkpoint* holds only the layers that cannot be
rewound (the gated-delta-net recurrent state; ``LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY``, as
llama-server's context checkpoints do), while the attention KV stays in the context and is
trimmed by position; a *saved* session holds the whole state (KV too), so a conversation that
another prompt displaced comes back without recomputing it.
"""

from __future__ import annotations

import ctypes

import llama_cpp
import numpy as np

from app.engine.errors import RuntimeBackendError

RECURRENT_ONLY = llama_cpp.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY
WHOLE = llama_cpp.LLAMA_STATE_SEQ_FLAGS_NONE


def _pointer(buffer: np.ndarray) -> ctypes.POINTER(ctypes.c_uint8):
    return buffer.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))


def state_size(ctx: llama_cpp.llama_context_p, flags: int) -> int:
    """Bytes :func:`copy_state` would take."""
    return llama_cpp.llama_state_seq_get_size_ext(ctx, 0, flags)


def copy_state(ctx: llama_cpp.llama_context_p, flags: int) -> np.ndarray:
    """Sequence 0's state (``RECURRENT_ONLY`` or ``WHOLE``) as bytes."""
    size = state_size(ctx, flags)
    buffer = np.empty(size, dtype=np.uint8)
    written = llama_cpp.llama_state_seq_get_data_ext(ctx, _pointer(buffer), size, 0, flags)
    if written != size:
        raise RuntimeBackendError(
            f"llama.cpp wrote {written} of {size} bytes of a context's state; the prompt cache "
            "cannot keep it"
        )
    return buffer


def restore_state(ctx: llama_cpp.llama_context_p, state: np.ndarray, flags: int) -> None:
    """Put a state taken by :func:`copy_state` with the same ``flags`` back into sequence 0."""
    read = llama_cpp.llama_state_seq_set_data_ext(ctx, _pointer(state), state.nbytes, 0, flags)
    if read == 0:
        raise RuntimeBackendError(
            f"llama.cpp read none of a kept state of {state.nbytes} bytes back into its context"
        )
