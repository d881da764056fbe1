"""Gemma 4's separate drafter (``gemma4-assistant``) as a :class:`~.drafter.Drafter`.

The assistant is a model of its own (docs/drafters.md): its context is created with
``ctx_other`` = the drafting target's context, and its KV cache *is* the target's (llama.cpp
binds its sliding layers to the target's layer n−2 and its full layers to n−1; its own
``seq_rm``, ``state_write`` and ``state_read`` do nothing). So, unlike the model's own MTP head
(:mod:`.mtp_head`), it keeps no rows: rolling back is the target's KV trim, a kept state is the
target's plus the one hidden row the decoding code already keeps (``Lane.hidden_last``), and the
committed rows handed over are ignored.

A draft is ``depth`` one-row decodes, all at the **same** position — the position the newest
token takes in the target (``position`` = the committed length), as llama.cpp's
``common_speculative_impl_draft_mtp`` and transformers' assistant do: step 1 feeds (the newest
token, the target's post-norm hidden row h_{position−1}); step k > 1 feeds (d_{k−1}, the
assistant's own exported state of step k−1). Each step attends to the target's keys and values
of positions < ``position`` only. q_k is the step's logits through the one sampler (the
decoding loop's ``choose``), so the acceptance stays exact whatever the assistant drafts.

Its context must read the target's cache as the target wrote it: the same flash-attention
setting (the V layout depends on it), the same K/V types and the same sliding-window cache size;
:func:`open_gemma4_assistant` creates it so.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from app.engine.runtime.backends.gguf_info import read_gguf_summary
from app.engine.runtime.backends.llama_cpp.batch import NumpyBatch
from app.engine.runtime.backends.llama_cpp.contexts import LlamaContext
from app.engine.runtime.backends.llama_cpp.drafter import Drafter
from app.engine.runtime.backends.llama_cpp.model import LlamaModel
from app.engine.runtime.core.backend import STOP_DRAFTING, DraftChooser, DraftResult
from app.engine.runtime.core.cpu_threads import ThreadChoice


class Gemma4AssistantDrafter(Drafter):
    """Drafts with ``context`` (the assistant's, bound to the target) for sequence ``seq``."""

    def __init__(self, context: LlamaContext, *, width: int, seq: int = 0):
        self.context = context
        self._seq = seq
        self._row = NumpyBatch(1, width)  # kept: the batch points into its arrays
        context.export_hidden_rows()

    def prompt_rows(self, start: int, tokens: Sequence[int], hidden: np.ndarray) -> None:
        """Nothing to run: the assistant reads the target's cache, which the prompt filled."""

    def commit_rows(self, start: int, tokens: Sequence[int], hidden: Sequence[np.ndarray]) -> None:
        """Nothing to keep: a draft needs only the newest hidden row, which it is given."""

    def draft(
        self,
        last_token: int,
        hidden: np.ndarray,
        position: int,
        depth: int,
        choose: DraftChooser,
    ) -> DraftResult:
        drafts: list[int] = []
        token, state = last_token, hidden[None, :]
        for index in range(depth):
            row = self._row.fill([token], position, outputs="last", hidden=state, seq=self._seq)
            self.context.decode(row, "a draft step of the drafter")
            token = choose(index, self.context.last_logits())  # a view: no copy of the row
            if token == STOP_DRAFTING:
                break
            drafts.append(token)
            state = self.context.hidden_rows(1)  # a view, copied into the batch before the decode
        return DraftResult(tuple(drafts))

    def keep_first(self, length: int) -> bool:
        return True  # the target's trim is the rollback

    def clear(self) -> None:
        """Nothing held."""

    def state_bytes(self) -> int:
        return 0

    def copy_state(self) -> Any:
        return None

    def restore_state(self, state: Any) -> None:
        """Nothing to restore: the target's state is the drafter's."""

    def close(self) -> None:
        self.context.close()


def open_gemma4_assistant(
    path: Path,
    target: LlamaContext,
    *,
    beside: LlamaModel,
    threads: ThreadChoice,
    kv_cache_type: str,
    flash_attention: str,
    swa_full: bool,
    gpu_layers: int,
) -> tuple[LlamaModel, Gemma4AssistantDrafter]:
    """Load the assistant GGUF at ``path`` beside the target's model ``beside`` (sharing its
    thread pools) and bind a context of it to ``target`` (its size, K/V types, flash attention
    and sliding-window cache as the target's); the caller frees the
    drafter, then the model. The pair was checked before (:func:`app.engine.drafter.pairing.
    check_pair`)."""
    model = LlamaModel(
        path, read_gguf_summary(path), load_mtp=False, gpu_layers=gpu_layers, beside=beside
    )
    try:
        context = model.new_context(
            target.size,
            threads,
            kv_cache_type=kv_cache_type,
            flash_attention=flash_attention,
            reads=target,
            swa_full=swa_full,
        )
    except BaseException:
        model.close()
        raise
    return model, Gemma4AssistantDrafter(context, width=model.width)
