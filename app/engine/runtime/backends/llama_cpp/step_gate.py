"""Continuous batching: the rows of every running sequence go into one ``llama_decode``.

With ``--parallel N`` a model's contexts hold N sequences (``n_seq_max`` N, the KV cache split
per sequence), and each running request decodes on its own thread with the same code a single
request runs (:mod:`.decode`, :mod:`.mtp_head`), through a :class:`SequenceContext`: a view of a
shared context for one sequence id. Its decode hands the rows to the :class:`StepGate` and waits;
once every running sequence has handed its next rows over (a step's one token, a verify's K + 1
rows, a draft step, a prompt chunk), the gate merges them, per context, into one batch, decodes
it once and gives each sequence its own logits and hidden rows (copies: the next decode
overwrites llama.cpp's buffers). A sequence that ends (or whose client went away) leaves the gate
and the next step runs without it. A prompt is fed in chunks of the sequence's batch capacity, so
the streams already running advance by one step per chunk
(docs/architecture.md#several-requests-in-one-context).

Every other native call on the shared contexts (cutting a sequence's memory, copying or
restoring its state) takes the gate's lock, so it never runs beside a decode.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import llama_cpp
import numpy as np

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.backends.llama_cpp.batch import MergedBatch, NumpyBatch
from app.engine.runtime.backends.llama_cpp.contexts import LlamaContext


class _Rows:
    """One sequence's rows waiting for a step, then what the decode gave them."""

    __slots__ = ("batch", "context", "done", "error", "hidden", "logits", "seq", "what")

    def __init__(self, context: LlamaContext, seq: int, batch: NumpyBatch, what: str) -> None:
        self.context = context
        self.seq = seq
        self.batch = batch
        self.what = what
        self.done = False
        self.error: RuntimeBackendError | None = None
        self.logits = np.empty((0, 0), dtype=np.float32)
        self.hidden: np.ndarray | None = None


class StepGate:
    """Merges the decodes of the sequences that run a request into one decode per context and
    step; ``capacity`` rows at most per merged batch (every sequence's batch capacity)."""

    def __init__(self, capacity: int, width: int) -> None:
        self._changed = threading.Condition(threading.RLock())
        self._running = 0
        self._waiting: list[_Rows] = []
        self._merged = MergedBatch(capacity, width)
        self.steps = 0
        """Decodes so far."""
        self.merged_steps = 0
        """Decodes that carried the rows of two or more sequences."""
        self.largest_merged_rows = 0
        """The most rows one decode of two or more sequences carried (a prompt chunk and the
        steps of the streams beside it)."""

    @contextlib.contextmanager
    def native(self) -> Iterator[None]:
        """Hold the gate for a native call on a shared context (none decodes meanwhile)."""
        with self._changed:
            yield

    def join(self) -> None:
        """A sequence starts a request: every step now waits for its rows too."""
        with self._changed:
            self._running += 1

    def leave(self) -> None:
        """A sequence ended its request: the step waiting for it runs without it."""
        with self._changed:
            self._running -= 1
            self._step_if_ready()

    def decode(self, rows: _Rows) -> _Rows:
        """Decode ``rows`` with the next step; their logits and hidden rows."""
        with self._changed:
            self._waiting.append(rows)
            self._step_if_ready()
            while not rows.done:
                self._changed.wait()
        if rows.error is not None:
            raise rows.error
        return rows

    def _step_if_ready(self) -> None:
        if not self._waiting or len(self._waiting) < self._running:
            return
        waiting, self._waiting = self._waiting, []
        try:
            contexts = list(dict.fromkeys(rows.context for rows in waiting))
            for context in contexts:
                parts = [rows for rows in waiting if rows.context is context]
                self._decode_together(context, parts)
        finally:
            for rows in waiting:
                rows.done = True
            self._changed.notify_all()

    def _decode_together(self, context: LlamaContext, parts: list[_Rows]) -> None:
        """One decode of ``parts`` on ``context``; each part gets its rows' results."""
        if len(parts) == 1:
            batch = parts[0].batch.struct
            what = parts[0].what
        else:
            batch = self._merged.merge([(rows.seq, rows.batch) for rows in parts])
            what = f"{len(parts)} sequences' rows"
        filled = [rows.batch.filled() for rows in parts]
        counts = [(len(tokens), int(outputs.sum())) for tokens, _, outputs, _ in filled]
        try:
            context.decode(batch, what)
        except RuntimeBackendError as exc:
            for rows in parts:
                rows.error = exc
            return
        self.steps += 1
        if len(parts) > 1:
            self.merged_steps += 1
            self.largest_merged_rows = max(self.largest_merged_rows, sum(n for n, _ in counts))
        logits = context.logits_rows(sum(outputs for _, outputs in counts))
        hidden = context.hidden_rows(sum(n for n, _ in counts)) if context.exports_hidden else None
        row = output = 0
        for rows, (n, outputs) in zip(parts, counts, strict=True):
            rows.logits = logits[output : output + outputs].copy()
            if hidden is not None:
                rows.hidden = hidden[row : row + n].copy()
            row += n
            output += outputs


class SequenceContext:
    """Sequence ``seq`` of a shared context, with the interface of :class:`LlamaContext`: its
    decodes go through ``gate``, its memory and state calls touch only its sequence. ``batch``
    is the sequence's own (its trunk and its drafter fill it in turn)."""

    def __init__(self, context: LlamaContext, seq: int, gate: StepGate, batch: NumpyBatch) -> None:
        self._context = context
        self.seq = seq
        self._gate = gate
        self._batch = batch
        self.model_name = context.model_name
        self._logits = np.empty((0, 0), dtype=np.float32)
        self._hidden = np.empty((0, 0), dtype=np.float32)

    @property
    def size(self) -> int:
        """The context window of one sequence, in tokens."""
        return llama_cpp.llama_n_ctx_seq(self._context.pointer)

    @property
    def thread_counts(self) -> tuple[int, int]:
        return self._context.thread_counts

    def decode(self, batch: llama_cpp.llama_batch, what: str) -> None:
        if batch is not self._batch.struct:
            raise RuntimeBackendError(f"a sequence decoded {what} from another sequence's batch")
        done = self._gate.decode(_Rows(self._context, self.seq, self._batch, what))
        self._logits = done.logits
        if done.hidden is not None:
            self._hidden = done.hidden

    def logits_rows(self, rows: int) -> np.ndarray:
        return self._logits[:rows]

    def last_logits(self) -> np.ndarray:
        return self._logits[0]

    def hidden_rows(self, rows: int) -> np.ndarray:
        return self._hidden[:rows]

    def export_hidden_rows(self) -> None:
        with self._gate.native():
            self._context.export_hidden_rows()

    def clear(self) -> None:
        with self._gate.native():
            llama_cpp.llama_memory_seq_rm(self._context.memory, self.seq, -1, -1)

    def keep_first(self, seq: int, length: int) -> bool:
        with self._gate.native():
            return self._context.keep_first(self.seq, length)

    def state_size(self, seq: int, flags: int) -> int:
        with self._gate.native():
            return self._context.state_size(self.seq, flags)

    def copy_state(self, seq: int, flags: int) -> np.ndarray:
        with self._gate.native():
            return self._context.copy_state(self.seq, flags)

    def restore_state(self, seq: int, state: np.ndarray, flags: int) -> None:
        with self._gate.native():
            self._context.restore_state(self.seq, state, flags)

    def close(self) -> None:
        """The shared context is closed by the backend that owns it."""
