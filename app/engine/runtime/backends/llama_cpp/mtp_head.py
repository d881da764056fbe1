"""The model's own MTP head as a :class:`~.drafter.Drafter`: the nextn block in a context of its
own (``LLAMA_CONTEXT_TYPE_MTP``, ``ctx_other`` = the drafting target) on the same model.

The head's cache is kept behind to save decodes: rows of committed tokens (a verify's accepted
ones, a plain step's while the head is idle in depth-0 stretches of the adaptive depth) are
queued and decoded in one batch together with the next cycle's first draft row. A step
therefore costs what a plain step costs, plus keeping one hidden-state row.

The head keeps one row more than the trunk: its row at p pairs x_p with h_{p−1}, so after the
trunk is cut to ``length`` tokens the head keeps its row at ``length`` (the first token after
the cut, when it is the same token).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.backends.llama_cpp.batch import NumpyBatch
from app.engine.runtime.backends.llama_cpp.contexts import WHOLE, LlamaContext
from app.engine.runtime.backends.llama_cpp.drafter import Drafter
from app.engine.runtime.core.backend import STOP_DRAFTING, DraftChooser, DraftResult


class MtpHeadDrafter(Drafter):
    """Drafts with ``context`` (the MTP head's) for sequence ``seq``; ``batch`` is shared with
    the trunk (decodes run one at a time)."""

    def __init__(self, context: LlamaContext, batch: NumpyBatch, *, seq: int = 0) -> None:
        self.context = context
        self._batch = batch
        self._seq = seq
        self._queue_start = 0
        self._queue_tokens: list[int] = []
        self._queue_hidden: list[np.ndarray] = []
        context.export_hidden_rows()

    def prompt_rows(self, start: int, tokens: Sequence[int], hidden: np.ndarray) -> None:
        self._run_queue(keep_last_rows=0)
        if len(tokens):
            self.context.decode(
                self._batch.fill(tokens, start, outputs="none", hidden=hidden, seq=self._seq),
                "the prompt through the MTP head",
            )
        self._queue_start = start + len(tokens)

    def commit_rows(self, start: int, tokens: Sequence[int], hidden: Sequence[np.ndarray]) -> None:
        held = self._queue_start + len(self._queue_tokens)
        for offset in range(max(held - start, 0), len(tokens)):
            self._queue_tokens.append(tokens[offset])
            self._queue_hidden.append(hidden[offset])

    def draft(
        self,
        last_token: int,
        hidden: np.ndarray,
        position: int,
        depth: int,
        choose: DraftChooser,
    ) -> DraftResult:
        if depth == 0:
            self._run_queue(keep_last_rows=0)
            return DraftResult(())
        self._run_queue(keep_last_rows=self._batch.capacity - 1)
        rows_hidden = np.vstack([*self._queue_hidden, hidden[None, :]])
        rows = len(rows_hidden)
        batch = self._batch.fill(
            [*self._queue_tokens, last_token],
            self._queue_start,
            outputs="last",
            hidden=rows_hidden,
            seq=self._seq,
        )
        self._queue_tokens, self._queue_hidden = [], []
        self._queue_start = position + 1
        drafts: list[int] = []
        for index in range(depth):
            self.context.decode(batch, "a draft step")
            token = choose(index, self.context.logits_rows(1)[0])  # a view: no copy of the row
            if token == STOP_DRAFTING:
                break
            drafts.append(token)
            if index + 1 < depth:
                head_hidden = self.context.hidden_rows(rows)[rows - 1 :]
                batch = self._batch.fill(
                    [token], position + index + 1, outputs="last", hidden=head_hidden, seq=self._seq
                )
                rows = 1
        if drafts and not self.context.keep_first(self._seq, position + 1):  # after the first
            raise RuntimeBackendError(
                f"llama.cpp refused to trim the MTP head's cache of {self.context.model_name}"
            )
        return DraftResult(tuple(drafts))

    def keep_first(self, length: int) -> bool:
        self._run_queue(keep_last_rows=0)
        return self.context.keep_first(self._seq, length + 1)

    def clear(self) -> None:
        self.context.clear()
        self._queue_start = 0
        self._queue_tokens, self._queue_hidden = [], []

    def state_bytes(self) -> int:
        return self.context.state_size(self._seq, WHOLE)

    def copy_state(self) -> np.ndarray:
        self._run_queue(keep_last_rows=0)
        return self.context.copy_state(self._seq, WHOLE)

    def restore_state(self, state: np.ndarray) -> None:
        self.context.restore_state(self._seq, state, WHOLE)
        self._queue_tokens, self._queue_hidden = [], []

    def close(self) -> None:
        self.context.close()

    def _run_queue(self, keep_last_rows: int) -> None:
        """Decode queued rows beyond what fits in one batch with the next draft row."""
        while len(self._queue_tokens) > keep_last_rows:
            count = min(len(self._queue_tokens) - keep_last_rows, self._batch.capacity)
            self.context.decode(
                self._batch.fill(
                    self._queue_tokens[:count],
                    self._queue_start,
                    outputs="none",
                    hidden=np.vstack(self._queue_hidden[:count]),
                    seq=self._seq,
                ),
                "queued rows through the MTP head",
            )
            del self._queue_tokens[:count]
            del self._queue_hidden[:count]
            self._queue_start += count
