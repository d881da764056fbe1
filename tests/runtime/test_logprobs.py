"""Log-probabilities, ``min_tokens`` and ``ignore_eos`` on the demo model (real llama.cpp).

The contract (docs/server-api.md#log-probabilities): each token's log-probability is the
log-softmax of the target's raw logits at its position — under speculative decoding the verify
row that committed it, never the MTP head's draft row — so a speculative reply reports what
plain decoding reports for the same tokens, to 1e-4. A seeded sampled reply takes other tokens
with drafts than without (drafting consumes random draws), so its figures are compared with
plain decoding fed the same tokens.
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
from app.engine.runtime.sampling.sampler import SamplerSettings
from app.engine.runtime.speculative.generation import generate, prompt_tokens

TOLERANCE = 1e-4
STORY = (ChatMessage("user", "Tell me a story about a dragon."),)
GREEDY = SamplerSettings()
SAMPLED = SamplerSettings(temperature=0.8, top_p=0.95, seed=7)


@pytest.fixture(scope="module")
def demo() -> Iterator[LlamaCppBackend]:
    loaded = LlamaCppBackend(demo_model_path(), LoadSettings(threads=1, context_length=1024))
    yield loaded
    loaded.close()


def _run(backend: LlamaCppBackend, depth: int, sampler: SamplerSettings, **fields: object):
    request = GenerationRequest(
        messages=STORY, max_tokens=64, mtp_depth=depth, sampler=sampler, **fields
    )
    return generate(backend, request, emit=lambda _chunk: None, cancelled=lambda: False)


def _plain_reference(backend: LlamaCppBackend, result: GenerationResult) -> list[np.ndarray]:
    """Plain decoding fed ``result``'s tokens: the log-softmax of each position's logits."""
    request = GenerationRequest(messages=STORY, mtp_depth=0)
    logits = np.array(backend.prefill(prompt_tokens(backend, request), with_mtp=False))
    rows = []
    for token in result.token_ids:
        row = logits.astype(np.float64)
        rows.append(row - row.max() - np.log(np.exp(row - row.max()).sum()))
        logits = np.array(backend.step(token))
    backend.reset()
    return rows


def _largest_difference(result: GenerationResult, reference: list[np.ndarray]) -> float:
    assert len(result.logprobs) == len(result.token_ids) == len(reference)
    differences = []
    for entry, row, token in zip(result.logprobs, reference, result.token_ids, strict=True):
        assert entry.token == token
        differences.append(abs(entry.logprob - row[token]))
        differences += [abs(top.logprob - row[top.token]) for top in entry.top]
    return max(differences)


@pytest.mark.parametrize("depth", [2, 3])
def test_greedy_speculative_logprobs_equal_plain_decoding(
    demo: LlamaCppBackend, depth: int
) -> None:
    plain = _run(demo, 0, GREEDY, logprobs=5)
    speculative = _run(demo, depth, GREEDY, logprobs=5)
    assert speculative.token_ids == plain.token_ids
    assert speculative.stats.accepted_by_depth[0] > 0  # drafts were kept: verify rows were read
    largest = max(
        abs(a.logprob - b.logprob)
        for one, other in zip(plain.logprobs, speculative.logprobs, strict=True)
        for a, b in zip((one, *one.top), (other, *other.top), strict=True)
    )
    assert largest <= TOLERANCE
    assert [e.token for e in speculative.logprobs] == list(speculative.token_ids)
    # the 5 alternatives are the likeliest, most likely first, and greedy took the first
    for entry in speculative.logprobs:
        assert len(entry.top) == 5 and entry.top[0].token == entry.token
        assert [t.logprob for t in entry.top] == sorted(
            (t.logprob for t in entry.top), reverse=True
        )
        assert 0.0 < sum(np.exp(t.logprob) for t in entry.top) <= 1.0 + 1e-6


def test_sampled_speculative_logprobs_equal_plain_decoding_of_the_same_tokens(
    demo: LlamaCppBackend,
) -> None:
    speculative = _run(demo, 3, SAMPLED, logprobs=3)
    assert speculative.stats.accepted_by_depth[0] > 0
    assert _largest_difference(speculative, _plain_reference(demo, speculative)) <= TOLERANCE
    plain = _run(demo, 0, SAMPLED, logprobs=3)
    assert _largest_difference(plain, _plain_reference(demo, plain)) <= TOLERANCE


def test_no_logprobs_unless_asked(demo: LlamaCppBackend) -> None:
    result = _run(demo, 2, GREEDY)
    assert result.logprobs == ()


def test_logprobs_zero_reports_the_chosen_tokens_only(demo: LlamaCppBackend) -> None:
    result = _run(demo, 2, GREEDY, logprobs=0)
    assert len(result.logprobs) == len(result.token_ids)
    assert all(entry.top == () and entry.logprob <= 0.0 for entry in result.logprobs)


def test_min_tokens_holds_the_end_back_exactly_as_plain_decoding(demo: LlamaCppBackend) -> None:
    free = _run(demo, 0, GREEDY)
    assert free.finish_reason == "stop"  # the story ends by itself before 64 tokens ...
    least = len(free.token_ids) + 4
    plain = _run(demo, 0, GREEDY, min_tokens=least)
    speculative = _run(demo, 3, GREEDY, min_tokens=least)
    assert len(plain.token_ids) >= least  # ... and not before min_tokens with it
    assert speculative.token_ids == plain.token_ids
    assert not any(demo.is_end_of_generation(token) for token in plain.token_ids)


@pytest.mark.parametrize("depth", [0, 3])
def test_ignore_eos_runs_to_max_tokens(demo: LlamaCppBackend, depth: int) -> None:
    result = _run(demo, depth, SAMPLED, ignore_eos=True)
    assert result.finish_reason == "length"
    assert len(result.token_ids) == 64
