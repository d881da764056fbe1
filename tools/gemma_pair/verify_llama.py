"""Checks that the pinned llama.cpp loads both GGUFs of a pair and drafts as transformers does.

The converter's output is only useful if llama.cpp runs it as the reference does, so the pair is
loaded through llama-cpp-python's low-level API the way llama.cpp's ``--spec-type draft-mtp`` does
it (docs/drafters.md): the target context exports its post-norm hidden rows
(``llama_set_embeddings_nextn``), the assistant context is created with ``ctx_type`` MTP and
``ctx_other`` = the target context (it reads the target's token embedding and KV cache), and a
draft step decodes one row carrying (token, hidden state) at the position of the newest token.
Compared with transformers: the tokenizer on probe strings, the target's next-token argmax along
a held-out text, and the first draft step's logits after a few prompts (llama.cpp's assistant
head is the dense tied one: the converter drops the centroid tensors).
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import llama_cpp
import numpy as np
import torch
from gemma_pair.drafting import assistant_step, run_target, target_embeddings
from llama_cpp import llama_cpp_ext
from tokenizers import Tokenizer
from transformers import Gemma4AssistantForCausalLM, Gemma4ForCausalLM

from app.engine.runtime.backends.llama_cpp import log as llama_cpp_log
from app.engine.runtime.backends.llama_cpp.batch import NumpyBatch

TOKENIZER_PROBES = (
    "def add(a, b):\n    return a + b\n",
    "<bos><|turn>user\nReturn the sum of a list.<turn|>\n<|turn>model\n",
    "    if not isinstance(value, int):\n        raise TypeError(f'{value!r} is not an int')\n",
    "Ünïcödé: naïve café, 東京, emoji 🦙 and tabs\tand\r\nCRLF",
    "x = [i**2 for i in range(10)]  # squares\n\n\n",
    "  leading spaces,   runs   of spaces  and trailing  ",
)
CONTEXT = 512


@dataclass(frozen=True)
class LlamaAgreement:
    tokenizer_mismatches: tuple[str, ...]
    target_positions: int
    target_argmax_agreement: float
    target_max_abs_logit_diff: float
    draft_prompts: int
    draft_argmax_agreement: float
    draft_max_abs_logit_diff: float


class LoadedPair:
    """Target and assistant GGUFs in llama.cpp, with the draft context bound to the target's."""

    def __init__(self, target: Path, assistant: Path) -> None:
        llama_cpp_log.install()
        self.target_model = _load(target)
        self.assistant_model = _load(assistant)
        self.target_ctx = _context(self.target_model, None)
        self.draft_ctx = _context(self.assistant_model, self.target_ctx)
        llama_cpp_ext.llama_set_embeddings_nextn(self.target_ctx, True, False)
        llama_cpp_ext.llama_set_embeddings_nextn(self.draft_ctx, True, True)
        self.vocab = llama_cpp.llama_model_get_vocab(self.target_model)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)
        self.width = llama_cpp.llama_model_n_embd_out(self.target_model)
        self._rows = NumpyBatch(CONTEXT)
        self._draft_rows = NumpyBatch(1, self.width)

    def close(self) -> None:
        llama_cpp.llama_free(self.draft_ctx)
        llama_cpp.llama_free(self.target_ctx)
        llama_cpp.llama_model_free(self.assistant_model)
        llama_cpp.llama_model_free(self.target_model)

    def tokenize(self, text: str) -> list[int]:
        raw = text.encode()
        buffer = (llama_cpp.llama_token * (len(raw) + 8))()
        count = llama_cpp.llama_tokenize(
            self.vocab, raw, len(raw), buffer, len(buffer), False, True
        )
        return list(buffer[:count])

    def prefill(self, tokens: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Clear the target and decode ``tokens``: (logits of every row, hidden of every row)."""
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.target_ctx), True)
        batch = self._rows.fill(list(tokens), 0, outputs="all")
        _check(llama_cpp.llama_decode(self.target_ctx, batch), "target decode")
        count = len(tokens)
        logits = np.ctypeslib.as_array(
            llama_cpp.llama_get_logits(self.target_ctx), shape=(count, self.n_vocab)
        ).copy()
        hidden = np.ctypeslib.as_array(
            llama_cpp_ext.llama_get_embeddings_nextn(self.target_ctx), shape=(count, self.width)
        ).copy()
        return logits, hidden

    def draft_step(
        self, token: int, hidden: np.ndarray, position: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """One assistant row (token, hidden) at ``position``: (logits, the state to carry)."""
        batch = self._draft_rows.fill([token], position, outputs="all", hidden=hidden[None])
        _check(llama_cpp.llama_decode(self.draft_ctx, batch), "draft decode")
        logits = np.ctypeslib.as_array(
            llama_cpp.llama_get_logits_ith(self.draft_ctx, 0), shape=(self.n_vocab,)
        ).copy()
        carried = np.ctypeslib.as_array(
            llama_cpp_ext.llama_get_embeddings_nextn_ith(self.draft_ctx, 0), shape=(self.width,)
        ).copy()
        return logits, carried


def _load(path: Path) -> llama_cpp.llama_model_p:
    model = llama_cpp.llama_model_load_from_file(
        str(path).encode(), llama_cpp.llama_model_default_params()
    )
    if not model:
        raise SystemExit(f"llama.cpp could not load {path}: {llama_cpp_log.take_recent()}")
    return model


def _context(
    model: llama_cpp.llama_model_p, other: llama_cpp.llama_context_p | None
) -> llama_cpp.llama_context_p:
    params = llama_cpp.llama_context_default_params()
    params.n_ctx = CONTEXT
    params.n_batch = params.n_ubatch = CONTEXT
    params.n_seq_max = 1
    params.n_threads = params.n_threads_batch = 1
    if other is not None:
        params.ctx_type = llama_cpp.LLAMA_CONTEXT_TYPE_MTP
        params.ctx_other = other
    ctx = llama_cpp.llama_init_from_model(model, params)
    if not ctx:
        raise SystemExit(f"llama.cpp could not create a context: {llama_cpp_log.take_recent()}")
    if other is not None:
        bound = llama_cpp_ext.llama_get_ctx_other(ctx)
        if ctypes.cast(bound, ctypes.c_void_p).value != ctypes.cast(other, ctypes.c_void_p).value:
            raise SystemExit("the assistant context is not bound to the target context")
    return ctx


def _check(code: int, what: str) -> None:
    if code != 0:
        raise SystemExit(f"llama.cpp {what} failed ({code}): {llama_cpp_log.take_recent()}")


@torch.no_grad()
def compare_with_transformers(
    pair: LoadedPair,
    tokenizer: Tokenizer,
    target: Gemma4ForCausalLM,
    assistant: Gemma4AssistantForCausalLM,
    text: Sequence[int],
    prompts: Sequence[Sequence[int]],
) -> LlamaAgreement:
    mismatches = tuple(
        probe for probe in TOKENIZER_PROBES if pair.tokenize(probe) != tokenizer.encode(probe).ids
    )
    ours_logits, _ = pair.prefill(text)
    theirs = run_target(target, torch.tensor([list(text)])).logits[0].numpy()
    target_agree = float((ours_logits.argmax(-1) == theirs.argmax(-1)).mean())
    target_diff = float(np.abs(ours_logits - theirs).max())
    draft_agree, draft_diff = [], 0.0
    for prompt in prompts:
        logits, hidden = pair.prefill(prompt)
        first = int(logits[-1].argmax())
        drafted, _ = pair.draft_step(first, hidden[-1], len(prompt))
        tokens = torch.tensor([list(prompt)])
        seen = run_target(target, tokens)
        reference = (
            assistant_step(
                assistant,
                target_embeddings(target, torch.tensor([[first]])),
                seen.hidden[:, -1:],
                torch.tensor([[len(prompt)]]),
                seen.shared_kv,
            )
            .dense_logits[0, 0]
            .numpy()
        )
        draft_agree.append(int(drafted.argmax()) == int(reference.argmax()))
        draft_diff = max(draft_diff, float(np.abs(drafted - reference).max()))
    return LlamaAgreement(
        tokenizer_mismatches=mismatches,
        target_positions=len(text),
        target_argmax_agreement=target_agree,
        target_max_abs_logit_diff=target_diff,
        draft_prompts=len(prompts),
        draft_argmax_agreement=float(np.mean(draft_agree)),
        draft_max_abs_logit_diff=draft_diff,
    )
