"""Requests that the adaptive depth runs without drafts, on the context kept for them.

Plain requests skip the recurrent-state snapshots a drafting request needs for rollback, so
they run on a second target context; these tests check what a user would see: the same
tokens as plain decoding, no drafts in the statistics, and a clear error (not garbage) if a
loop drafts on a request that was prefilled without the head.
"""

from __future__ import annotations

import time

import pytest

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.request import GenerationRequest, GenerationResult
from app.engine.runtime.sampling.sampler import SamplerSettings
from app.engine.runtime.speculative.depth_policy import AdaptiveDepth, DepthPolicies
from app.engine.runtime.speculative.generation import generate

PROMPT = (ChatMessage("user", "Count the vowels in a word."),)
PLAIN_STEP_SECONDS = 0.9e-3


def _request(depth: int, *, adaptive: bool) -> GenerationRequest:
    return GenerationRequest(
        messages=PROMPT,
        max_tokens=48,
        sampler=SamplerSettings(temperature=0.0),
        mtp_depth=depth,
        adaptive_depth=adaptive,
    )


def _run(
    backend: LlamaCppBackend, request: GenerationRequest, policies: DepthPolicies | None = None
) -> GenerationResult:
    return generate(
        backend,
        request,
        emit=lambda _chunk: None,
        cancelled=lambda: False,
        depth_policies=policies,
    )


def _policies_that_prefer_plain_requests() -> DepthPolicies:
    """A policy whose measurements say plain steps (0.9 ms) beat every depth (≥ 1 ms/token;
    a step of the tiny test model really takes about a tenth of that)."""
    policies = DepthPolicies(remember=False)
    policy = policies.for_request(4, adaptive=True)
    assert isinstance(policy, AdaptiveDepth)
    assert policy.restore(
        {
            "trials": [0.0, 10.0, 10.0, 0.0, 0.0],
            "kept": [0.0, 5.0, 2.0, 0.0, 0.0],
            "timed": {"0": [1e-3], "1": [2e-3], "2": [3e-3]},
            "plain_timed": [PLAIN_STEP_SECONDS],
        }
    )
    return policies


def test_a_request_the_policy_runs_plainly_matches_plain_decoding(
    backend: LlamaCppBackend,
) -> None:
    plain = _run(backend, _request(0, adaptive=False))
    policies = _policies_that_prefer_plain_requests()
    adaptive = _run(backend, _request(4, adaptive=True), policies)
    assert adaptive.token_ids == plain.token_ids
    stats = adaptive.stats
    assert stats.cycles == stats.generated_tokens - 1 and not any(stats.drafted_by_depth)
    # It ran as a plain request (a drafting one at depth 0 would not time plain steps), and
    # its steps were timed for the next decision.
    policy = policies.for_request(4, adaptive=True)
    assert isinstance(policy, AdaptiveDepth)
    assert policy.plain_tokens_per_second() > 1.0 / PLAIN_STEP_SECONDS
    assert policy.drafts_this_request is False
    # The request never fed the MTP head (its prefill left it out), so nothing can draft on it.
    with pytest.raises(RuntimeBackendError, match="prefilled without the MTP head"):
        backend.draft(adaptive.token_ids[-1], 1, lambda _index, _logits: 0)


def test_drafting_after_a_plain_prefill_is_a_clear_error(backend: LlamaCppBackend) -> None:
    backend.reset()
    backend.prefill(backend.tokenize("Plain prefill", parse_special=False), with_mtp=False)
    with pytest.raises(RuntimeBackendError, match="prefilled without the MTP head"):
        backend.draft(1, 2, lambda _index, _logits: 0)
    with pytest.raises(RuntimeBackendError, match="prefilled without the MTP head"):
        backend.verify([1, 2])


def test_a_one_thread_cpu_backend_times_cycles_without_other_processes_time(
    backend: LlamaCppBackend,
) -> None:
    """The adaptive depth's clock: a wait (the core given to another process) does not count,
    work on the decoding thread does."""
    clock = backend.cycle_clock
    started = clock()
    time.sleep(0.05)
    assert clock() - started < 0.01
    started = clock()
    backend.reset()
    backend.prefill(backend.tokenize("Some work " * 20, parse_special=False), with_mtp=True)
    assert clock() - started > 0
