"""Drafting only while the MTP head is sure: the stopping rule, and greedy exactness with it."""

from __future__ import annotations

import numpy as np

from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.core.request import GenerationRequest
from app.engine.runtime.sampling.draft_confidence import ConfidenceStop, band_of, head_confidence
from app.engine.runtime.speculative.depth_policy import DepthPolicies
from app.engine.runtime.speculative.generation import generate


def test_head_confidence_is_the_softmax_probability_among_the_likeliest_tokens() -> None:
    logits = np.log(np.array([0.7, 0.2, 0.1], dtype=np.float32)) + 3.0
    assert abs(head_confidence(logits, 0) - 0.7) < 1e-6
    assert abs(head_confidence(logits, 2) - 0.1) < 1e-6
    wide = np.linspace(-60.0, -40.0, 1000, dtype=np.float32)
    wide[7], wide[9] = 2.0, 1.0
    assert abs(head_confidence(wide, 7) - 1 / (1 + np.exp(-1.0))) < 1e-4
    assert head_confidence(wide, 0) == 0.0  # not among the 32 likeliest
    assert band_of(0.0) == 0 and band_of(0.95) == 9 and band_of(1.0) == 9


def _trained(accepted_share_of_band: dict[int, float], cycles: int = 400) -> ConfidenceStop:
    """A rule that has seen first drafts of each band accepted at the given share."""
    stop = ConfidenceStop()
    for band, share in accepted_share_of_band.items():
        for index in range(cycles):
            stop.start_cycle(greedy=True)
            assert stop.keeps_drafting((band + 0.5) / 10, cost_ratio=1e-6)
            stop.learn(1 if index < share * cycles else 0)
    return stop


def test_a_band_the_target_rejects_is_not_drafted_and_a_band_it_accepts_is() -> None:
    stop = _trained({9: 0.95, 2: 0.02})
    assert stop.acceptance(9, greedy=True) > 0.9 and stop.acceptance(2, greedy=True) < 0.05
    # Sampling requests learn apart (their confidence is the sampler's, not temperature 1's).
    assert stop.acceptance(2, greedy=False) == 0.25
    stop.start_cycle(greedy=True)
    assert stop.keeps_drafting(0.95, cost_ratio=0.1)
    assert not stop.keeps_drafting(0.25, cost_ratio=0.1)


def test_dearer_draft_steps_stop_the_draft_sooner() -> None:
    stop = _trained({9: 0.95, 6: 0.6})

    def drafts(cost_ratio: float) -> int:
        stop.start_cycle(greedy=True)
        count = 0
        while count < 8 and stop.keeps_drafting(0.65 if count % 2 else 0.95, cost_ratio):
            count += 1
        return count

    cheap, dear = drafts(0.02), drafts(0.5)
    assert cheap > dear >= 1


def test_greedy_output_with_the_confidence_stop_is_plain_decodings(
    backend: LlamaCppBackend,
) -> None:
    policies = DepthPolicies(remember=False)
    stops = 0
    for prompt in ("The sea at night", "def parse(text):", "One two three four"):

        def run(depth: int, prompt: str = prompt) -> tuple[tuple[int, ...], int]:
            request = GenerationRequest(
                prompt=prompt, max_tokens=40, mtp_depth=depth, stop_unsure_drafts=True
            )
            result = generate(
                backend,
                request,
                emit=lambda _chunk: None,
                cancelled=lambda: False,
                depth_policies=policies,
            )
            return result.token_ids, result.stats.confidence_stops

        plain, _ = run(0)
        speculative, stopped = run(4)
        assert speculative == plain
        stops += stopped
    assert stops > 0, "the tiny model's head is unsure often enough to stop some drafts"
