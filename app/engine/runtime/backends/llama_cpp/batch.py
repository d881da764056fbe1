"""A ``llama_batch`` whose arrays are numpy buffers, reused for every decode call.

The MTP head's rows carry a token id *and* a hidden state
(docs/architecture.md#the-llamacpp-backend, step 5), a combination ``llama_batch_init`` cannot
allocate (it gives either tokens or embeddings). Owning the buffers in numpy also means filling a
batch is a few vectorised copies instead of a Python loop per field and token, which matters when a
decode step of a small model takes well under a millisecond.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

import llama_cpp
import numpy as np


class _BatchBuffers:
    """The numpy buffers of up to ``capacity`` rows (with ``width``-float hidden rows when
    ``width``) and the ``llama_batch`` pointing at them. Row ``r``'s sequence id is read from cell
    ``r % seq_cells`` of ``_seqs``: one cell for a batch of one sequence, a cell per row for a
    merged one."""

    def __init__(self, capacity: int, width: int, seq_cells: int) -> None:
        self.capacity = capacity
        self._tokens = np.zeros(capacity, dtype=np.int32)
        self._positions = np.zeros(capacity, dtype=np.int32)
        self._seq_counts = np.ones(capacity, dtype=np.int32)
        self._seqs = np.zeros(seq_cells, dtype=np.int32)
        self._outputs = np.zeros(capacity, dtype=np.int8)
        self._hidden = np.zeros((capacity, width), dtype=np.float32) if width else None
        int32_pointer = ctypes.POINTER(ctypes.c_int32)
        cell, base = ctypes.sizeof(ctypes.c_int32), self._seqs.ctypes.data
        self._seq_ids = (int32_pointer * capacity)(
            *(
                ctypes.cast(base + (row % seq_cells) * cell, int32_pointer)
                for row in range(capacity)
            )
        )
        self._struct = llama_cpp.llama_batch()
        self._struct.token = self._tokens.ctypes.data_as(int32_pointer)
        self._struct.pos = self._positions.ctypes.data_as(int32_pointer)
        self._struct.n_seq_id = self._seq_counts.ctypes.data_as(int32_pointer)
        self._struct.seq_id = self._seq_ids
        self._struct.logits = self._outputs.ctypes.data_as(ctypes.POINTER(ctypes.c_int8))
        self._hidden_pointer = (
            self._hidden.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
            if self._hidden is not None
            else None
        )


class NumpyBatch(_BatchBuffers):
    """Up to ``capacity`` rows of one sequence, optionally with ``width``-float hidden rows."""

    def __init__(self, capacity: int, width: int = 0) -> None:
        super().__init__(capacity, width, seq_cells=1)

    def fill(
        self,
        tokens: Sequence[int] | np.ndarray,
        first_position: int,
        *,
        outputs: str,
        hidden: np.ndarray | None = None,
        seq: int = 0,
    ) -> llama_cpp.llama_batch:
        """Rows ``tokens`` of sequence ``seq`` at consecutive positions; ``outputs``: ``"all"``,
        ``"last"``, ``"none"``.

        With ``hidden`` (one row per token) the batch carries both ids and hidden states, as
        the MTP head's input rows do.
        """
        count = len(tokens)
        self._seqs[0] = seq
        if count == 1 and hidden is None:  # a plain step: no numpy call per field
            self._tokens[0], self._positions[0] = tokens[0], first_position
            self._outputs[0] = outputs != "none"
            self._struct.n_tokens = 1
            self._struct.embd = None
            return self._struct
        self._tokens[:count] = tokens
        self._positions[:count] = np.arange(first_position, first_position + count)
        self._outputs[:count] = 1 if outputs == "all" else 0
        if outputs == "last":
            self._outputs[count - 1] = 1
        self._struct.n_tokens = count
        if hidden is not None and self._hidden is not None:
            self._hidden[:count] = hidden
            self._struct.embd = self._hidden_pointer
        else:
            self._struct.embd = None
        return self._struct

    @property
    def struct(self) -> llama_cpp.llama_batch:
        """The ``llama_batch`` :meth:`fill` returns."""
        return self._struct

    def filled(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """The rows of the last :meth:`fill`: tokens, positions, output flags and hidden rows
        (None when the batch carries none); views, valid until the next fill."""
        count = self._struct.n_tokens
        hidden = self._hidden[:count] if self._struct.embd and self._hidden is not None else None
        return self._tokens[:count], self._positions[:count], self._outputs[:count], hidden


class MergedBatch(_BatchBuffers):
    """The rows of several sequences in one ``llama_batch``, up to ``capacity`` rows: what one
    step of continuous batching decodes (:mod:`.step_gate`). Each row's sequence id has a cell
    of its own, so filling a sequence's rows is a vectorised copy too."""

    def __init__(self, capacity: int, width: int) -> None:
        super().__init__(capacity, width, seq_cells=capacity)

    def merge(self, parts: Sequence[tuple[int, NumpyBatch]]) -> llama_cpp.llama_batch:
        """One batch of every ``(seq, batch)`` part's filled rows, in order. Hidden rows go in
        when the parts carry them (all or none: one context takes one kind of row)."""
        row = 0
        with_hidden = False
        for seq, batch in parts:
            tokens, positions, outputs, hidden = batch.filled()
            end = row + len(tokens)
            if end > self.capacity:
                raise ValueError(f"{end} rows exceed the merged batch's {self.capacity}")
            self._tokens[row:end] = tokens
            self._positions[row:end] = positions
            self._outputs[row:end] = outputs
            self._seqs[row:end] = seq
            if hidden is not None and self._hidden is not None:
                self._hidden[row:end] = hidden
                with_hidden = True
            row = end
        self._struct.n_tokens = row
        self._struct.embd = self._hidden_pointer if with_hidden else None
        return self._struct
