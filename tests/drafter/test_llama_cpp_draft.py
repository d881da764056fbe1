"""The pinned llama.cpp loads both GGUFs of each pair and drafts as transformers does.

Through llama-cpp-python's low-level API, the way llama.cpp's ``--spec-type draft-mtp`` runs a
``gemma4-assistant`` (docs/drafters.md): the target context exports its post-norm hidden rows,
the drafter's context is created with ``ctx_type`` MTP and ``ctx_other`` = the target context,
and a draft step is one row (token, hidden state) at the newest token's position. Its logits are
compared with the reference drafts transformers 5.23 computed (the dense tied head: llama.cpp's
converter drops the centroid tensors), within what Q8_0 weights move them. Without
``ctx_other`` llama.cpp refuses the drafter's context — it must, the drafter has no keys of its
own.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from pathlib import Path

import llama_cpp
import numpy as np
import pytest
from llama_cpp import llama_cpp_ext

from app.engine.runtime.backends.llama_cpp import log as llama_cpp_log
from app.engine.runtime.backends.llama_cpp.batch import NumpyBatch
from tests.drafter.pairs import PAIRS, Pair

CONTEXT = 256
Q8_TOLERANCE = 0.15
"""Max |Δlogit| against the BF16 reference (logits of order 5–10): Q8_0 weights move them by
0.05 (dense) and 0.07 (centroid) at most over three steps on the shipped pairs."""


def _context(model: llama_cpp.llama_model_p, other: object = None) -> llama_cpp.llama_context_p:
    params = llama_cpp.llama_context_default_params()
    params.n_ctx = CONTEXT
    params.n_batch = params.n_ubatch = CONTEXT
    params.n_seq_max = 1
    params.n_threads = params.n_threads_batch = 1
    if other is not None:
        params.ctx_type = llama_cpp.LLAMA_CONTEXT_TYPE_MTP
        params.ctx_other = other
    return llama_cpp.llama_init_from_model(model, params)


def _load(path: Path) -> llama_cpp.llama_model_p:
    model = llama_cpp.llama_model_load_from_file(
        str(path).encode(), llama_cpp.llama_model_default_params()
    )
    assert model, llama_cpp_log.take_recent()
    return model


class LoadedPair:
    def __init__(self, pair: Pair) -> None:
        self.target_model, self.drafter_model = _load(pair.target), _load(pair.drafter)
        self.target = _context(self.target_model)
        self.draft = _context(self.drafter_model, self.target)
        assert self.target and self.draft, llama_cpp_log.take_recent()
        llama_cpp_ext.llama_set_embeddings_nextn(self.target, True, False)
        llama_cpp_ext.llama_set_embeddings_nextn(self.draft, True, True)
        self.vocab = llama_cpp.llama_vocab_n_tokens(
            llama_cpp.llama_model_get_vocab(self.target_model)
        )
        self.width = llama_cpp.llama_model_n_embd_out(self.target_model)
        self._rows = NumpyBatch(CONTEXT)  # kept: the batch points into its arrays
        self._draft_row = NumpyBatch(1, self.width)

    def close(self) -> None:
        for ctx in (self.draft, self.target):
            llama_cpp.llama_free(ctx)
        for model in (self.drafter_model, self.target_model):
            llama_cpp.llama_model_free(model)

    def prefill(self, tokens: list[int]) -> tuple[np.ndarray, np.ndarray]:
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.target), True)
        batch = self._rows.fill(tokens, 0, outputs="last")
        assert llama_cpp.llama_decode(self.target, batch) == 0, llama_cpp_log.take_recent()
        logits = np.ctypeslib.as_array(
            llama_cpp.llama_get_logits_ith(self.target, -1), shape=(self.vocab,)
        )
        hidden = np.ctypeslib.as_array(
            llama_cpp_ext.llama_get_embeddings_nextn(self.target), shape=(len(tokens), self.width)
        )
        return logits.copy(), hidden[-1].copy()

    def draft_step(self, token: int, hidden: np.ndarray, position: int) -> tuple[np.ndarray, ...]:
        batch = self._draft_row.fill([token], position, outputs="all", hidden=hidden[None])
        assert llama_cpp.llama_decode(self.draft, batch) == 0, llama_cpp_log.take_recent()
        logits = np.ctypeslib.as_array(
            llama_cpp.llama_get_logits_ith(self.draft, 0), shape=(self.vocab,)
        )
        carried = np.ctypeslib.as_array(
            llama_cpp_ext.llama_get_embeddings_nextn_ith(self.draft, 0), shape=(self.width,)
        )
        return logits.copy(), carried.copy()


@pytest.fixture(params=list(PAIRS.values()), ids=list(PAIRS))
def loaded(request: pytest.FixtureRequest) -> Iterator[tuple[Pair, LoadedPair]]:
    llama_cpp_log.install()
    pair = LoadedPair(request.param)
    yield request.param, pair
    pair.close()


def test_the_drafter_context_is_bound_to_the_target_context(
    loaded: tuple[Pair, LoadedPair],
) -> None:
    _pair, pair = loaded
    bound = llama_cpp_ext.llama_get_ctx_other(pair.draft)
    assert (
        ctypes.cast(bound, ctypes.c_void_p).value == ctypes.cast(pair.target, ctypes.c_void_p).value
    )
    assert llama_cpp.llama_model_n_layer_nextn(pair.drafter_model) == 4
    assert llama_cpp.llama_model_n_embd_out(pair.drafter_model) == pair.width


def test_llama_cpp_drafts_what_transformers_drafts(loaded: tuple[Pair, LoadedPair]) -> None:
    pair_files, pair = loaded
    reference = np.load(pair_files.reference)
    worst = 0.0
    for index in range(3):
        prompt = reference[f"prompt_{index}"].tolist()
        target_logits, hidden = pair.prefill(prompt)
        assert int(target_logits.argmax()) == int(reference[f"first_{index}"])
        token = int(reference[f"first_{index}"])
        for step, wanted in enumerate(reference[f"dense_logits_{index}"]):
            logits, hidden = pair.draft_step(token, hidden, len(prompt))
            worst = max(worst, float(np.abs(logits - wanted).max()))
            assert worst < Q8_TOLERANCE, (index, step)
            assert wanted[int(logits.argmax())] > wanted.max() - Q8_TOLERANCE
            token = int(reference[f"drafted_{index}"][step])
    print(f"{pair_files.kind}: llama.cpp (Q8_0) vs transformers max |Δlogit| {worst:.3f}")


def test_without_ctx_other_llama_cpp_refuses_the_drafter_context() -> None:
    llama_cpp_log.install()
    model = _load(PAIRS["dense"].drafter)
    try:
        assert not _context(model)
        assert "Gemma4Assistant requires ctx_other to be set" in llama_cpp_log.take_recent()
    finally:
        llama_cpp.llama_model_free(model)
