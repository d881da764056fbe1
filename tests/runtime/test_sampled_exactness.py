"""At temperature > 0, MTP with LC acceptance samples what plain decoding samples (real model).

The math test checks the acceptance law on hand-made p and q; this one checks the plumbing on
llama.cpp: drafts, their q rows and the verify rows must line up, or the law is fed the wrong
distributions and the output drifts (while greedy output, which never reads q, stays identical).
The second and third tokens of many seeded runs are compared between plain decoding and MTP
(depth 2) with a two-sample chi-square test.
"""

from __future__ import annotations

from collections import Counter

import pytest

from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.core.request import GenerationRequest
from app.engine.runtime.sampling.acceptance import AcceptMode
from app.engine.runtime.sampling.sampler import SamplerSettings
from app.engine.runtime.speculative.depth_policy import DepthPolicies
from app.engine.runtime.speculative.generation import generate
from tests.runtime.chi_square import chi_square_critical

RUNS = 2000


def _tokens_at(
    backend: LlamaCppBackend, depth: int, accept: AcceptMode, *, stop_unsure: bool = False
) -> tuple[list[tuple[int, ...]], int]:
    """The tokens of every seeded run, and how many cycles ended their draft early."""
    samples = []
    stops = 0
    policies = DepthPolicies(remember=False)  # what the confidence bands learn carries over
    for seed in range(RUNS):
        request = GenerationRequest(
            prompt="The sea",
            max_tokens=3,
            mtp_depth=depth,
            accept=accept,
            sampler=SamplerSettings(temperature=1.0, top_k=6, seed=seed),
            stop_unsure_drafts=stop_unsure,
        )
        result = generate(
            backend,
            request,
            emit=lambda _c: None,
            cancelled=lambda: False,
            depth_policies=policies,
        )
        samples.append(result.token_ids)
        stops += result.stats.confidence_stops
    return samples, stops


def _two_sample_chi_square(first: Counter, second: Counter) -> tuple[float, int]:
    categories = [key for key in first.keys() | second.keys() if first[key] + second[key] >= 10]
    statistic = sum((first[k] - second[k]) ** 2 / (first[k] + second[k]) for k in categories)
    return statistic, len(categories) - 1


@pytest.mark.slow
@pytest.mark.parametrize(
    ("accept", "stop_unsure"),
    [
        (AcceptMode.LEVIATHAN_CHEN, False),
        (AcceptMode.MATCH, False),
        (AcceptMode.LEVIATHAN_CHEN, True),
    ],
    ids=["LC", "match", "LC, drafts stopping when unsure"],
)
def test_sampled_mtp_tokens_follow_plain_decoding(
    backend: LlamaCppBackend, accept: AcceptMode, stop_unsure: bool
) -> None:
    plain, _ = _tokens_at(backend, 0, accept)
    speculative, stops = _tokens_at(backend, 2, accept, stop_unsure=stop_unsure)
    if stop_unsure:  # the draft length really varied, and the output still follows plain
        assert stops > 0
    assert all(len(tokens) == 3 for tokens in plain + speculative)
    for position in (1, 2):
        statistic, dof = _two_sample_chi_square(
            Counter(tokens[position] for tokens in plain),
            Counter(tokens[position] for tokens in speculative),
        )
        assert dof >= 3
        assert statistic < chi_square_critical(dof, 1e-4), (position, statistic, dof)
