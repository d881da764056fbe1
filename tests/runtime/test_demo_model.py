"""Exactness on the bundled demo GGUF (a trained Qwen3.5 trunk + MTP layer), as shipped.

The tiny random models exercise every path cheaply; this repeats the contract on the model the
app actually opens by default: greedy MTP output identical to plain decoding at depths 1–4 with
partial acceptances, rollback leaving the state of a fresh run, and clean chat text.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.demo_model import demo_model_path
from app.engine.runtime.core.request import GenerationRequest, GenerationResult
from app.engine.runtime.core.stats import StatsRecorder
from app.engine.runtime.sampling.acceptance import AcceptMode
from app.engine.runtime.sampling.sampler import SamplerSettings, greedy_token
from app.engine.runtime.speculative.cycle import SpeculativeDecoder
from app.engine.runtime.speculative.generation import generate

CHATS = ("Return the number of lines in a text file.", "Merge two sorted lists into one.")
RAW_PROMPTS = ("import os\n\n\ndef walk(top):\n", "class Queue:\n    def __init__(self")


@pytest.fixture(scope="module")
def demo() -> Iterator[LlamaCppBackend]:
    backend = LlamaCppBackend(demo_model_path(), LoadSettings(threads=1, context_length=1024))
    yield backend
    backend.close()


def _requests(depth: int) -> list[GenerationRequest]:
    chats = [
        GenerationRequest(messages=(ChatMessage("user", text),), max_tokens=64, mtp_depth=depth)
        for text in CHATS
    ]
    raw = [GenerationRequest(prompt=text, max_tokens=64, mtp_depth=depth) for text in RAW_PROMPTS]
    return chats + raw


def _run(demo: LlamaCppBackend, request: GenerationRequest) -> GenerationResult:
    return generate(demo, request, emit=lambda _c: None, cancelled=lambda: False)


def test_the_demo_model_has_a_usable_mtp_head(demo: LlamaCppBackend) -> None:
    assert demo.info.architecture == "qwen35"
    assert demo.info.mtp_available and demo.info.mtp_layers == 1
    assert demo.info.has_chat_template


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
@pytest.mark.slow
def test_greedy_mtp_on_the_demo_model_is_identical_to_plain_decoding(
    demo: LlamaCppBackend, depth: int
) -> None:
    not_all_accepted = partial = accepted = 0
    for plain_request, request in zip(_requests(0), _requests(depth), strict=True):
        plain = _run(demo, plain_request)
        speculative = _run(demo, request)
        assert speculative.token_ids == plain.token_ids
        assert speculative.text == plain.text
        stats = speculative.stats
        not_all_accepted += stats.cycles - stats.accepted_by_depth[-1]
        partial += stats.accepted_by_depth[0] - stats.accepted_by_depth[-1]
        accepted += stats.accepted_by_depth[0]
    assert not_all_accepted > 0 and accepted > 0
    if depth > 1:
        assert partial > 0


def test_rollback_on_the_demo_model_leaves_the_state_of_a_fresh_run(
    demo: LlamaCppBackend,
) -> None:
    prompt = demo.tokenize("def read_lines(path):\n", parse_special=False)
    sampler = SamplerSettings(temperature=0.8, seed=9)
    rng = np.random.default_rng(9)
    decoder = SpeculativeDecoder(
        demo, sampler, AcceptMode.LEVIATHAN_CHEN, rng, StatsRecorder(mode="lc", depth=3)
    )
    demo.reset()
    committed = [greedy_token(demo.prefill(prompt, with_mtp=True))]
    accepted = []
    for _ in range(16):
        cycle = decoder.cycle(committed[-1], 3)
        committed.extend(cycle.tokens)
        accepted.append(cycle.accepted)
    assert min(accepted) < 3 and max(accepted) > 0
    after_cycles = demo.step(committed[-1]).copy()  # the backend's buffer: copied to keep

    demo.reset()
    demo.prefill(prompt, with_mtp=False)
    for token in committed:
        fresh = demo.step(token)
    difference = float(np.max(np.abs(after_cycles - fresh)))
    print(f"demo rollback: max |Δlogit| vs a fresh plain run = {difference:.3g}")
    assert greedy_token(after_cycles) == greedy_token(fresh)
    assert difference < 1e-2


def test_demo_answers_are_clean_text(demo: LlamaCppBackend) -> None:
    answer = _run(demo, _requests(3)[0])
    assert answer.text.strip()
    assert "<|im_" not in answer.text and "<|endoftext|>" not in answer.text
