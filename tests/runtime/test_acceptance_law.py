"""The acceptance laws reproduce the target distribution exactly (math only).

The contract: docs/architecture.md#the-exactness-contract.

Hand-made target rows p_1..p_3 and proposal rows q_1, q_2 (depth 2), drafts drawn from q, then
the law under test run 10^6 times (LC) or 2·10^5 times (match). The first committed token must
follow p_1 and the second (when the cycle commits two or more) p_2, within a chi-square bound
whose false-alarm rate is 10^-6. A deliberately wrong law (repair from p instead of the residual)
must fail the same bound, which shows the bound has the power to catch a bias.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

from app.engine.runtime.sampling.acceptance import (
    CycleOutcome,
    accept_by_matching,
    accept_leviathan_chen,
)
from app.engine.runtime.sampling.distribution import draw
from tests.runtime.chi_square import chi_square_critical

P = [
    np.array([0.40, 0.30, 0.20, 0.10, 0.00]),
    np.array([0.05, 0.15, 0.30, 0.20, 0.30]),
    np.array([0.25, 0.25, 0.25, 0.20, 0.05]),
]
Q = [
    np.array([0.10, 0.20, 0.30, 0.20, 0.20]),
    np.array([0.30, 0.30, 0.20, 0.10, 0.10]),
]
FALSE_ALARM = 1e-6

Law = Callable[[Sequence[int], np.random.Generator], CycleOutcome]


def test_the_chi_square_bound_matches_known_quantiles() -> None:
    # χ² tables: P(χ²_4 > 9.488) = 0.05, P(χ²_3 > 16.266) = 0.001
    assert chi_square_critical(4, 0.05) == pytest.approx(9.488, abs=1e-3)
    assert chi_square_critical(3, 0.001) == pytest.approx(16.266, abs=1e-3)


def _chi_square(counts: np.ndarray, probs: np.ndarray) -> tuple[float, int]:
    support = probs > 0
    assert counts[~support].sum() == 0, "a token with zero target probability was emitted"
    expected = probs[support] * counts.sum()
    return float(((counts[support] - expected) ** 2 / expected).sum()), int(support.sum()) - 1


def _run(law: Law, samples: int, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Counts of the first and second committed tokens, and the mean accepted drafts."""
    rng = np.random.default_rng(seed)
    drafts = np.stack([rng.choice(5, samples, p=q) for q in Q], axis=1).tolist()
    first = np.zeros(5, dtype=np.int64)
    second = np.zeros(5, dtype=np.int64)
    accepted_total = 0
    for cycle_drafts in drafts:
        outcome = law(cycle_drafts, rng)
        committed = [*cycle_drafts[: outcome.accepted], outcome.next_token]
        first[committed[0]] += 1
        if len(committed) > 1:
            second[committed[1]] += 1
        accepted_total += outcome.accepted
    return first, second, accepted_total / samples


def _lc(drafts: Sequence[int], rng: np.random.Generator) -> CycleOutcome:
    return accept_leviathan_chen(drafts, Q, P, rng)


def _match(drafts: Sequence[int], rng: np.random.Generator) -> CycleOutcome:
    return accept_by_matching(drafts, P, rng)


def _lc_repairing_from_p(drafts: Sequence[int], rng: np.random.Generator) -> CycleOutcome:
    """A wrong law: on rejection it draws from p instead of the residual max(p − q, 0)."""
    for depth, draft in enumerate(drafts):
        if rng.random() * Q[depth][draft] >= P[depth][draft]:
            return CycleOutcome(depth, draw(P[depth], rng))
    return CycleOutcome(len(drafts), draw(P[len(drafts)], rng))


def _assert_follows_target(first: np.ndarray, second: np.ndarray) -> None:
    for counts, probs in ((first, P[0]), (second, P[1])):
        statistic, dof = _chi_square(counts, probs)
        bound = chi_square_critical(dof, FALSE_ALARM)
        assert statistic < bound, f"χ²={statistic:.1f} ≥ {bound:.1f} for counts {counts}"


@pytest.mark.slow
def test_leviathan_chen_reproduces_the_target_distribution() -> None:
    first, second, mean_accepted = _run(_lc, 1_000_000, seed=11)
    _assert_follows_target(first, second)
    # acceptance at depth 1 is Σ min(p, q) exactly
    expected_depth1 = float(np.minimum(P[0], Q[0]).sum())
    assert first.sum() == 1_000_000
    assert mean_accepted == pytest.approx(
        expected_depth1 * (1 + float(np.minimum(P[1], Q[1]).sum())), rel=0.01
    )


@pytest.mark.slow
def test_sample_and_compare_reproduces_the_target_distribution() -> None:
    first, second, _ = _run(_match, 200_000, seed=12)
    _assert_follows_target(first, second)


@pytest.mark.slow
def test_leviathan_chen_accepts_more_than_sample_and_compare() -> None:
    _, _, lc_accepted = _run(_lc, 50_000, seed=13)
    _, _, match_accepted = _run(_match, 50_000, seed=13)
    # Σ min(p, q) = 0.7 at depth 1 versus Σ p·q = 0.20 for sample-and-compare
    assert lc_accepted > 2 * match_accepted


@pytest.mark.slow
def test_a_law_without_residual_repair_fails_the_same_bound() -> None:
    first, _, _ = _run(_lc_repairing_from_p, 200_000, seed=14)
    statistic, dof = _chi_square(first, P[0])
    assert statistic > chi_square_critical(dof, FALSE_ALARM)
