"""One llama.cpp context: decode a batch, read its logits and hidden rows, cut or copy its state.

A model holds up to three contexts (the drafting target, the MTP head's, the plain target); each
is a :class:`LlamaContext`, so the code that runs requests says *what* it does to a context
(decode these rows, keep the first n tokens of a sequence, copy its recurrent state) rather than
repeating the ctypes calls and their error checks.

Kept states (prefix reuse) are of two kinds: a *checkpoint* holds only the layers that cannot be
rewound (the gated-delta-net recurrent state; ``LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY``, as
llama-server's context checkpoints do), while the attention KV stays in the context and is
trimmed by position; a *saved* session holds the whole state (KV too), so a conversation that
another prompt displaced comes back without recomputing it.

Sequence ids are explicit in every memory and state call: a context holds sequence 0 only, or
with ``--parallel N`` N sequences, each decoded through a view of its own (:mod:`.step_gate`).
"""

from __future__ import annotations

import ctypes
import time
from typing import Any

import llama_cpp
import numpy as np
from llama_cpp import llama_cpp_ext

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.backends.llama_cpp import log as llama_cpp_log

RECURRENT_ONLY = llama_cpp.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY
WHOLE = llama_cpp.LLAMA_STATE_SEQ_FLAGS_NONE


def _pointer(buffer: np.ndarray) -> ctypes.POINTER(ctypes.c_uint8):
    return buffer.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))


class ComputeTime:
    """Seconds spent inside ``llama_decode``, summed over the contexts of one model."""

    __slots__ = ("seconds",)

    def __init__(self) -> None:
        self.seconds = 0.0


class LlamaContext:
    """A ``llama_context`` and its memory; ``model_name`` names the file in error messages;
    ``compute`` adds up the time its decodes take."""

    def __init__(
        self,
        pointer: llama_cpp.llama_context_p,
        *,
        model_name: str,
        vocab_size: int,
        width: int,
        compute: ComputeTime,
    ) -> None:
        self.pointer = pointer
        self.memory = llama_cpp.llama_get_memory(pointer)
        self.model_name = model_name
        self._vocab_size = vocab_size
        self._width = width
        self._compute = compute
        self._logits = _BufferView(llama_cpp.llama_get_logits, vocab_size)
        self._hidden = _BufferView(llama_cpp_ext.llama_get_embeddings_nextn, width)
        self.exports_hidden = False

    @property
    def size(self) -> int:
        """The context window of a sequence, in tokens."""
        return llama_cpp.llama_n_ctx_seq(self.pointer)

    @property
    def thread_counts(self) -> tuple[int, int]:
        """The CPU threads of a step and of a batch."""
        return llama_cpp.llama_n_threads(self.pointer), llama_cpp.llama_n_threads_batch(
            self.pointer
        )

    def decode(self, batch: llama_cpp.llama_batch, what: str) -> None:
        started = time.perf_counter()
        code = llama_cpp.llama_decode(self.pointer, batch)
        self._compute.seconds += time.perf_counter() - started
        if code != 0:
            raise RuntimeBackendError(
                f"llama.cpp failed to decode {what} of {self.model_name} (code {code}: "
                f"{llama_cpp_log.take_recent()})"
            )

    def logits_rows(self, rows: int) -> np.ndarray:
        """The last decode's logits, one row per output row: a view of llama.cpp's buffer,
        valid until this context decodes again (copy what you keep)."""
        return self._logits.rows(self.pointer, rows)

    def last_logits(self) -> np.ndarray:
        """The logits row of a one-row decode (a view, as :meth:`logits_rows`)."""
        return self._logits.first_row(self.pointer)

    def hidden_rows(self, rows: int) -> np.ndarray:
        """The last decode's exported hidden states, one row per batch row (a view, as
        :meth:`logits_rows`)."""
        return self._hidden.rows(self.pointer, rows)

    def export_hidden_rows(self) -> None:
        """Export the hidden state of every row (unmasked; see the backend's docstring)."""
        llama_cpp_ext.llama_set_embeddings_nextn(self.pointer, True, False)
        self.exports_hidden = True

    # --- memory ---------------------------------------------------------------------------

    def clear(self) -> None:
        llama_cpp.llama_memory_clear(self.memory, True)

    def keep_first(self, seq: int, length: int) -> bool:
        """Drop positions ``length`` and after of ``seq``; False when llama.cpp refuses (a
        recurrent state rolled back further than its snapshots reach)."""
        return bool(llama_cpp.llama_memory_seq_rm(self.memory, seq, length, -1))

    # --- kept states ----------------------------------------------------------------------

    def state_size(self, seq: int, flags: int) -> int:
        """Bytes :meth:`copy_state` would take."""
        return llama_cpp.llama_state_seq_get_size_ext(self.pointer, seq, flags)

    def copy_state(self, seq: int, flags: int) -> np.ndarray:
        """Sequence ``seq``'s state (``RECURRENT_ONLY`` or ``WHOLE``) as bytes."""
        size = self.state_size(seq, flags)
        buffer = np.empty(size, dtype=np.uint8)
        written = llama_cpp.llama_state_seq_get_data_ext(
            self.pointer, _pointer(buffer), size, seq, flags
        )
        if written != size:
            raise RuntimeBackendError(
                f"llama.cpp wrote {written} of {size} bytes of a context's state; the prompt "
                "cache cannot keep it"
            )
        return buffer

    def restore_state(self, seq: int, state: np.ndarray, flags: int) -> None:
        """Put a state taken by :meth:`copy_state` with the same ``flags`` back into ``seq``."""
        read = llama_cpp.llama_state_seq_set_data_ext(
            self.pointer, _pointer(state), state.nbytes, seq, flags
        )
        if read == 0:
            raise RuntimeBackendError(
                f"llama.cpp read none of a kept state of {state.nbytes} bytes back into its context"
            )

    def close(self) -> None:
        if self.pointer:
            llama_cpp.llama_free(self.pointer)
        self.pointer = None


_RETURNS_ADDRESS = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)


class _BufferView:
    """A numpy view of a float buffer llama.cpp owns (logits, exported hidden states), made once
    per buffer: llama.cpp keeps the buffer until it needs a larger one, and making a view through
    ``np.ctypeslib.as_array`` costs more than a small model's whole sampling step. The getter is
    called through a prototype that returns the address as an int, so checking that the buffer
    is still the same makes no ctypes pointer object either."""

    def __init__(self, getter: Any, width: int) -> None:
        self._address_of = _RETURNS_ADDRESS(ctypes.cast(getter, ctypes.c_void_p).value)
        self._width = width
        self._address = 0
        self._view = np.empty((0, width), dtype=np.float32)
        self._first = np.empty(width, dtype=np.float32)

    def rows(self, context: llama_cpp.llama_context_p, rows: int) -> np.ndarray:
        address = self._address_of(context)
        if address != self._address or rows > len(self._view):
            self._remake(address, rows)
        return self._view[:rows]

    def first_row(self, context: llama_cpp.llama_context_p) -> np.ndarray:
        """Row 0 (what a plain step reads): the same view every step while the buffer stays."""
        address = self._address_of(context)
        if address != self._address:
            self._remake(address, 1)
        return self._first

    def _remake(self, address: int, rows: int) -> None:
        if not address:
            raise RuntimeBackendError("llama.cpp returned no output buffer for the last decode")
        pointer = ctypes.cast(address, ctypes.POINTER(ctypes.c_float))
        self._view = np.ctypeslib.as_array(pointer, shape=(max(rows, 1), self._width))
        self._view.flags.writeable = False  # llama.cpp's own: nothing here may change it
        self._first = self._view[0]
        self._address = address
