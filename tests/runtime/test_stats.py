"""Statistics definitions (docs/architecture.md#statistics) and Leviathan's expected speedup."""

from __future__ import annotations

import pytest

from app.engine.runtime.core.stats import (
    DecodeStats,
    StatsRecorder,
    alpha_for_tokens_per_cycle,
    combined_stats,
    expected_speedup,
    expected_tokens_per_cycle,
)


def _stats(**overrides: object) -> DecodeStats:
    values: dict[str, object] = dict(
        mode="lc",
        depth=3,
        prompt_tokens=20,
        generated_tokens=100,
        cycles=40,
        drafted_by_depth=(40, 40, 40),
        accepted_by_depth=(36, 30, 24),
        prefill_seconds=0.5,
        ttft_seconds=0.6,
        elapsed_seconds=2.5,
        draft_seconds=0.3,
        draft_steps=120,
        verify_seconds=1.0,
        verify_calls=40,
    )
    values.update(overrides)
    return DecodeStats(**values)  # type: ignore[arg-type]


def test_leviathan_formula_values() -> None:
    # α = 0.8, K = 3, c = 0.1: (1 − 0.8⁴) / (0.2 · 1.3) = 0.5904 / 0.26
    assert expected_speedup(0.8, 3, 0.1) == pytest.approx(0.5904 / 0.26)
    assert expected_tokens_per_cycle(1.0, 3) == 4.0
    assert expected_tokens_per_cycle(0.0, 3) == 1.0


def test_alpha_is_the_inverse_of_tokens_per_cycle() -> None:
    for alpha in (0.1, 0.5, 0.77, 0.95):
        tokens = expected_tokens_per_cycle(alpha, 3)
        assert alpha_for_tokens_per_cycle(tokens, 3) == pytest.approx(alpha, abs=1e-9)


def test_derived_figures() -> None:
    stats = _stats()
    assert stats.acceptance_by_depth == (0.9, 0.75, 0.6)
    assert stats.mean_accepted_length == pytest.approx(90 / 40)
    assert stats.tokens_per_cycle == pytest.approx(1 + 90 / 40)
    assert stats.decode_seconds == pytest.approx(2.0)
    assert stats.decode_tokens_per_second == pytest.approx(50.0)
    assert stats.prefill_tokens_per_second == pytest.approx(40.0)
    # c = (0.3 s / 120 steps) / (1.0 s / 40 verifies) = 0.0025 / 0.025
    assert stats.draft_verify_cost_ratio == pytest.approx(0.1)
    assert stats.expected_speedup == pytest.approx(stats.tokens_per_cycle / 1.3)


def test_plain_decoding_has_no_cycle_figures() -> None:
    stats = _stats(
        mode="ar",
        depth=0,
        cycles=0,
        drafted_by_depth=(),
        accepted_by_depth=(),
        draft_seconds=0.0,
        draft_steps=0,
        verify_seconds=0.0,
        verify_calls=0,
    )
    assert stats.tokens_per_cycle == 0.0
    assert stats.draft_verify_cost_ratio == 0.0
    assert stats.expected_speedup == 1.0


def test_recorder_counts_prefixes_by_depth() -> None:
    recorder = StatsRecorder(mode="lc", depth=3)
    recorder.record_cycle(drafted=3, accepted=0)
    recorder.record_cycle(drafted=3, accepted=2)
    recorder.record_cycle(drafted=3, accepted=3)
    recorder.record_cycle(drafted=2, accepted=2)
    snapshot = recorder.snapshot()
    assert snapshot.drafted_by_depth == (4, 4, 3)
    assert snapshot.accepted_by_depth == (3, 3, 1)
    assert snapshot.cycles == 4


def test_to_dict_carries_recorded_and_derived_figures() -> None:
    data = _stats().to_dict()
    assert data["accepted_by_depth"] == [36, 30, 24]
    assert data["acceptance_by_depth"] == [0.9, 0.75, 0.6]
    assert data["decode_tokens_per_second"] == pytest.approx(50.0)
    assert data["expected_speedup"] > 1.0


def test_pooled_requests_weigh_each_cycle_and_token_once() -> None:
    short = _stats(
        generated_tokens=10,
        cycles=4,
        drafted_by_depth=(4, 4, 4),
        accepted_by_depth=(4, 4, 4),
        elapsed_seconds=0.6,
        verify_calls=4,
    )
    pooled = combined_stats([_stats(), short])
    assert pooled.drafted_by_depth == (44, 44, 44)
    assert pooled.acceptance_by_depth == pytest.approx((40 / 44, 34 / 44, 28 / 44))
    # Not the mean of the two requests' rates: 110 tokens over (2.0 + 0.1) s of decoding.
    assert pooled.decode_tokens_per_second == pytest.approx(110 / 2.1)
    assert pooled.mode == "lc" and pooled.depth == 3 and pooled.verify_calls == 44


def test_alpha_under_auto_depth_uses_the_depths_drafted() -> None:
    # Issue 23: auto depth (most 4) drafted one token in each of 8 cycles and 5 were kept:
    # 1 + α = 13/8, so α = 0.625 (the largest depth gave 0.39).
    stats = _stats(
        depth=4,
        adaptive=True,
        cycles=8,
        drafted_by_depth=(8, 0, 0, 0),
        accepted_by_depth=(5, 0, 0, 0),
        draft_steps=8,
        verify_calls=8,
        draft_seconds=0.08,
        verify_seconds=0.8,
    )
    assert stats.depth_mix == ((1, 8),)
    assert stats.alpha == pytest.approx(0.625, abs=1e-9)
    assert stats.expected_speedup == pytest.approx(1.625 / 1.1)


def test_alpha_for_a_mix_of_depths_reproduces_the_measured_tokens() -> None:
    # 10 cycles: 4 drafted nothing, 2 drafted one token, 4 drafted three.
    stats = _stats(
        depth=3,
        adaptive=True,
        cycles=10,
        drafted_by_depth=(6, 4, 4),
        accepted_by_depth=(5, 3, 2),
    )
    assert stats.depth_mix == ((0, 4), (1, 2), (3, 4))
    expected = (
        4 * expected_tokens_per_cycle(stats.alpha, 0)
        + 2 * expected_tokens_per_cycle(stats.alpha, 1)
        + 4 * expected_tokens_per_cycle(stats.alpha, 3)
    ) / 10
    assert expected == pytest.approx(stats.tokens_per_cycle)
    assert 0 < stats.alpha < 1


def test_a_fixed_depth_gives_the_same_alpha_as_before() -> None:
    stats = _stats()
    assert stats.depth_mix == ((3, 40),)
    assert stats.alpha == pytest.approx(alpha_for_tokens_per_cycle(stats.tokens_per_cycle, 3))
