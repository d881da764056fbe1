"""A grafted GGUF drafts in the real llama.cpp backend as the converter's own GGUF does.

The bases are the demo trunk in Q8_0 and requantised to Q4_0; the head is the sidecar the
extractor makes from the FP8 "original release", so its weights differ slightly from the shipped
demo GGUF's head (FP8 → BF16) — acceptance must stay within 0.05 of it, and greedy output must be
identical to plain decoding at every depth.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.request import GenerationRequest, GenerationResult
from app.engine.runtime.speculative.generation import generate
from tests.graft.bases import DEMO_GGUF

CHATS = ("Return the number of lines in a text file.", "Merge two sorted lists into one.")
RAW_PROMPTS = ("import os\n\n\ndef walk(top):\n", "class Queue:\n    def __init__(self")
MODELS = ("grafted_q8", "grafted_q4")


def requests(depth: int) -> list[GenerationRequest]:
    chats = [
        GenerationRequest(messages=(ChatMessage("user", text),), max_tokens=64, mtp_depth=depth)
        for text in CHATS
    ]
    raw = [GenerationRequest(prompt=text, max_tokens=64, mtp_depth=depth) for text in RAW_PROMPTS]
    return chats + raw


def run(backend: LlamaCppBackend, request: GenerationRequest) -> GenerationResult:
    return generate(backend, request, emit=lambda _c: None, cancelled=lambda: False)


def depth_one_acceptance(backend: LlamaCppBackend) -> float:
    drafted = accepted = 0
    for request in requests(1):
        stats = run(backend, request).stats
        drafted += stats.drafted_by_depth[0]
        accepted += stats.accepted_by_depth[0]
    return accepted / drafted


@pytest.fixture(scope="module")
def backends(graft_files: dict[str, Path]) -> Iterator[dict[str, LlamaCppBackend]]:
    settings = LoadSettings(threads=1, context_length=1024)
    loaded = {name: LlamaCppBackend(graft_files[name], settings) for name in MODELS}
    loaded["demo"] = LlamaCppBackend(DEMO_GGUF, settings)
    yield loaded
    for backend in loaded.values():
        backend.close()


@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS)
def test_greedy_mtp_on_a_grafted_gguf_is_identical_to_plain_decoding(
    backends: dict[str, LlamaCppBackend], model: str
) -> None:
    backend = backends[model]
    assert backend.info.mtp_available and backend.info.mtp_layers == 1
    for depth in (1, 2, 3):
        partial = 0
        for plain_request, mtp_request in zip(requests(0), requests(depth), strict=True):
            plain, speculative = run(backend, plain_request), run(backend, mtp_request)
            assert speculative.token_ids == plain.token_ids, (model, depth)
            stats = speculative.stats
            assert stats.cycles > 0 and stats.accepted_by_depth[0] > 0, (model, depth)
            partial += stats.accepted_by_depth[0] - stats.accepted_by_depth[-1]
        if depth > 1:
            assert partial > 0, (model, depth)  # the rollback after a partial accept ran


@pytest.mark.slow
def test_depth_one_acceptance_of_the_q8_graft_is_within_005_of_the_shipped_gguf(
    backends: dict[str, LlamaCppBackend],
) -> None:
    shipped = depth_one_acceptance(backends["demo"])
    grafted = depth_one_acceptance(backends["grafted_q8"])
    assert shipped > 0.5  # the demo head is trained: a broken graft would be near 0
    assert abs(grafted - shipped) <= 0.05, (grafted, shipped)
