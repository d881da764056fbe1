"""Several requests at once in one llama.cpp context (``serve --parallel N``): exactness is
unchanged.

Four sequences of the tiny hybrid model (its drafts are right often but not always, so cycles
reject, accept partly and accept fully) decode different prompts at the same time, starting at
different moments and ending at different lengths: each reply equals the one the model gives a
single client, plain and with MTP, and the steps really were decoded together. A long prompt
that arrives while another reply streams is prefilled in chunks beside it; a sequence keeps its
own conversation for prefix reuse; through the worker process, a cancelled stream frees its
sequence for the next request while another keeps streaming; and at temperature 1 two
sequences drafting side by side sample what plain decoding samples (chi-square).
(docs/architecture.md#several-requests-in-one-context)
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.backends.llama_cpp.sequences import PREFILL_CHUNK
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.backend import DecodeBackend, LoadSettings
from app.engine.runtime.core.demo_model import demo_model_path
from app.engine.runtime.core.request import GenerationRequest, GenerationResult
from app.engine.runtime.process.client import RuntimeClient
from app.engine.runtime.sampling.sampler import SamplerSettings
from app.engine.runtime.speculative.generation import generate
from tests.runtime.chi_square import chi_square_critical
from tests.runtime.test_sampled_exactness import RUNS, _two_sample_chi_square

SEQUENCES = 4
PROMPTS = (
    "The quick brown fox jumps over the lazy dog",
    "def fibonacci(n):\n    return",
    "Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich",
    "Once upon a time, in a kingdom by the sea,",
)


@pytest.fixture(scope="module")
def parallel(tiny_models: dict[str, Path]) -> Iterator[LlamaCppBackend]:
    settings = LoadSettings(threads=1, context_length=1024, sequences=SEQUENCES)
    loaded = LlamaCppBackend(tiny_models["mtp"], settings)
    yield loaded
    loaded.close()


def _request(prompt: str, depth: int, tokens: int) -> GenerationRequest:
    return GenerationRequest(prompt=prompt, max_tokens=tokens, mtp_depth=depth)


def _generate(backend: DecodeBackend, request: GenerationRequest, **kw: object) -> GenerationResult:
    with backend.running():
        return generate(
            backend, request, emit=kw.get("emit", lambda _c: None), cancelled=lambda: False
        )


def _at_once(
    backends: tuple[DecodeBackend, ...], requests: list[GenerationRequest], stagger: float
) -> list[GenerationResult]:
    results: list[GenerationResult | None] = [None] * len(requests)

    def run(index: int) -> None:
        time.sleep(stagger * index)
        results[index] = _generate(backends[index], requests[index])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert all(result is not None for result in results), "a sequence did not finish"
    return results  # type: ignore[return-value]


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_concurrent_greedy_replies_equal_single_client_replies(
    backend: LlamaCppBackend, parallel: LlamaCppBackend, depth: int
) -> None:
    requests = [_request(p, depth, 32 + 8 * i) for i, p in enumerate(PROMPTS)]
    alone = [_generate(backend, request) for request in requests]
    gate = parallel.sequence_backends[0]._gate  # type: ignore[attr-defined]
    merged_before = gate.merged_steps
    together = _at_once(parallel.sequence_backends, requests, stagger=0.002)
    for single, concurrent in zip(alone, together, strict=True):
        assert concurrent.token_ids == single.token_ids
        assert concurrent.text == single.text
    assert gate.merged_steps - merged_before > 20, "the sequences were not decoded together"
    if depth:
        cycles = sum(result.stats.cycles for result in together)
        kept_first = sum(result.stats.accepted_by_depth[0] for result in together)
        assert 0 < kept_first < cycles  # drafts were rejected and accepted, per sequence


def test_a_long_prompt_is_prefilled_in_chunks_beside_a_running_stream(
    backend: LlamaCppBackend, parallel: LlamaCppBackend
) -> None:
    long_prompt = " ".join(["the sea was calm and the ships came home"] * 20)  # ~640 tokens
    running = _request(PROMPTS[0], 2, 400)
    arriving = _request(long_prompt, 2, 24)
    alone = [_generate(backend, running), _generate(backend, arriving)]
    assert alone[1].stats.prompt_tokens > 2 * PREFILL_CHUNK
    gate = parallel.sequence_backends[0]._gate  # type: ignore[attr-defined]
    gate.largest_merged_rows = 0
    streaming = threading.Event()
    together: list[GenerationResult | None] = [None, None]

    def stream() -> None:
        together[0] = _generate(
            parallel.sequence_backends[0], running, emit=lambda _c: streaming.set()
        )

    def arrive() -> None:  # while the first reply streams
        assert streaming.wait(60)
        together[1] = _generate(parallel.sequence_backends[1], arriving)

    threads = [threading.Thread(target=stream), threading.Thread(target=arrive)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert together[0] is not None and together[1] is not None
    assert together[1].stats.generated_tokens == 24 and together[0].finish_reason == "length"
    assert [r.token_ids for r in together] == [r.token_ids for r in alone]  # type: ignore[union-attr]
    # A prompt chunk went into a step with the stream's rows, and no step took the whole prompt.
    assert PREFILL_CHUNK <= gate.largest_merged_rows <= PREFILL_CHUNK + 8


def test_each_sequence_keeps_its_own_conversation_for_prefix_reuse(
    backend: LlamaCppBackend, parallel: LlamaCppBackend
) -> None:
    first, second = parallel.sequence_backends[:2]
    turns = [  # long enough that the recurrent trunk keeps a checkpoint before the reply
        (ChatMessage("user", " ".join(f"sea{i}" for i in range(40))),),
        (ChatMessage("user", " ".join(f"moon{i}" for i in range(45))),),
    ]
    requests = [GenerationRequest(messages=t, max_tokens=24, mtp_depth=2) for t in turns]
    replies = _at_once((first, second), requests, stagger=0.0)
    follow_ups = [
        GenerationRequest(
            messages=(*turn, ChatMessage("assistant", reply.text), ChatMessage("user", "More.")),
            max_tokens=24,
            mtp_depth=2,
        )
        for turn, reply in zip(turns, replies, strict=True)
    ]
    continued = _at_once((first, second), follow_ups, stagger=0.0)
    pairs = zip((first, second), follow_ups, replies, continued, strict=True)
    for sequence, follow_up, reply, result in pairs:
        backend.reset()  # the single client computes the whole conversation
        assert result.token_ids == _generate(backend, follow_up).token_ids
        # Kept up to where the reply starts (this random model's replies are byte soup that
        # tokenises differently when the template renders them again).
        reused = result.stats.prompt_reused_tokens
        assert reused >= reply.prompt_token_count - 1, "the conversation was recomputed"
        assert sequence.last_prefix_reuse.reused_tokens == result.stats.prompt_reused_tokens


@pytest.mark.slow
def test_a_cancelled_stream_frees_its_sequence_while_another_streams() -> None:
    settings = LoadSettings(threads=1, context_length=2048, state_cache_mib=0)
    long = GenerationRequest(prompt="Once upon a time", max_tokens=3000, mtp_depth=2)
    short = GenerationRequest(prompt="The sea", max_tokens=40, mtp_depth=2)
    with RuntimeClient(demo_model_path(), settings=settings) as one:
        expected = one.generate(short).token_ids
    with RuntimeClient(demo_model_path(), settings=replace(settings, sequences=2)) as client:
        assert client.load().sequences == 2
        streaming, leaving = client.start(long), client.start(long)
        next(iter(streaming)), next(iter(leaving))
        leaving.cancel()
        assert leaving.wait().finish_reason == "cancelled"
        assert client.start(short).wait().token_ids == expected  # in the freed sequence
        assert streaming.result is None, "the other stream kept running meanwhile"
        streaming.cancel()
        assert streaming.wait().finish_reason == "cancelled"


@pytest.mark.slow
def test_sampled_mtp_tokens_of_concurrent_sequences_follow_plain_decoding(
    backend: LlamaCppBackend, parallel: LlamaCppBackend
) -> None:
    """At temperature 1, two sequences drafting side by side sample what one plain client
    samples (two-sample chi-square on the 2nd and 3rd tokens of many seeded runs): each
    sequence's drafts, q rows and verify rows line up with its own sampler."""
    runs = RUNS // 2

    def request(seed: int, depth: int) -> GenerationRequest:
        sampler = SamplerSettings(temperature=1.0, top_k=6, seed=seed)
        return GenerationRequest(prompt="The sea", max_tokens=3, mtp_depth=depth, sampler=sampler)

    plain = [_generate(backend, request(seed, 0)).token_ids for seed in range(2 * runs)]
    drafted: list[tuple[int, ...]] = []

    def sample(sequence: DecodeBackend, seeds: range) -> None:
        for seed in seeds:
            drafted.append(_generate(sequence, request(seed, 2)).token_ids)

    first, second = parallel.sequence_backends[:2]
    threads = [
        threading.Thread(target=sample, args=(first, range(0, runs))),
        threading.Thread(target=sample, args=(second, range(runs, 2 * runs))),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert len(drafted) == 2 * runs and all(len(tokens) == 3 for tokens in drafted)
    for position in (1, 2):
        statistic, dof = _two_sample_chi_square(
            Counter(tokens[position] for tokens in plain),
            Counter(tokens[position] for tokens in drafted),
        )
        assert dof >= 3
        assert statistic < chi_square_critical(dof, 1e-4), (position, statistic, dof)


@pytest.mark.slow
def test_each_conversation_returns_to_the_sequence_that_keeps_it() -> None:
    """Two clients take turns on a worker loaded for two sequences: each next turn goes to the
    sequence holding its conversation, so it reuses it (not to whichever sequence is free)."""
    settings = LoadSettings(threads=1, context_length=2048, sequences=2)
    openings = {
        "a": [ChatMessage("user", "Tell me a long story about a lighthouse keeper and a storm.")],
        "b": [ChatMessage("user", "Write a poem about mountains, rivers and the northern sky.")],
    }
    with RuntimeClient(demo_model_path(), settings=settings) as client:
        first = {
            name: client.generate(GenerationRequest(messages=tuple(turn), max_tokens=24))
            for name, turn in openings.items()
        }
        for name in ("b", "a"):  # b first: a plain queue would hand it a's sequence
            turn = (
                *openings[name],
                ChatMessage("assistant", first[name].text),
                ChatMessage("user", "Go on."),
            )
            reply = client.generate(GenerationRequest(messages=turn, max_tokens=8))
            assert reply.stats.prompt_reused_tokens >= first[name].prompt_token_count - 1, name
