"""The one sampler definition: order temperature → top-k → top-p → min-p, greedy, seeds."""

from __future__ import annotations

import numpy as np
import pytest

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.sampling.distribution import draw
from app.engine.runtime.sampling.sampler import SamplerSettings, distribution, greedy_token

LOGITS = np.log(np.array([0.05, 0.4, 0.1, 0.3, 0.15], dtype=np.float32))


def test_temperature_one_without_filters_is_the_softmax() -> None:
    probs = distribution(LOGITS, SamplerSettings(temperature=1.0))
    assert probs.dtype == np.float64
    np.testing.assert_allclose(probs, [0.05, 0.4, 0.1, 0.3, 0.15], rtol=1e-6)


def test_temperature_sharpens_and_flattens() -> None:
    cold = distribution(LOGITS, SamplerSettings(temperature=0.5))
    hot = distribution(LOGITS, SamplerSettings(temperature=2.0))
    expected_cold = np.array([0.05, 0.4, 0.1, 0.3, 0.15]) ** 2
    np.testing.assert_allclose(cold, expected_cold / expected_cold.sum(), rtol=1e-6)
    assert hot.max() < 0.4 < cold.max()


def test_greedy_is_one_hot_on_the_argmax() -> None:
    probs = distribution(LOGITS, SamplerSettings(temperature=0.0))
    assert probs.tolist() == [0.0, 1.0, 0.0, 0.0, 0.0]
    assert greedy_token(LOGITS) == 1


def test_top_k_keeps_the_k_largest() -> None:
    probs = distribution(LOGITS, SamplerSettings(temperature=1.0, top_k=2))
    np.testing.assert_allclose(probs, [0, 0.4 / 0.7, 0, 0.3 / 0.7, 0], rtol=1e-6)


def test_top_p_keeps_the_smallest_prefix_reaching_p() -> None:
    # sorted: 0.4, 0.3, 0.15, 0.1, 0.05 → cumulative 0.4, 0.7, 0.85: p=0.8 keeps three tokens
    probs = distribution(LOGITS, SamplerSettings(temperature=1.0, top_p=0.8))
    np.testing.assert_allclose(probs, [0, 0.4 / 0.85, 0, 0.3 / 0.85, 0.15 / 0.85], rtol=1e-6)


def _top_p_reference(full: np.ndarray, top_p: float) -> np.ndarray:
    order = np.argsort(-full, kind="stable")
    keep = order[: int(np.searchsorted(np.cumsum(full[order]), top_p)) + 1]
    expected = np.zeros_like(full)
    expected[keep] = full[keep] / full[keep].sum()
    return expected


def test_top_p_on_a_large_vocabulary_matches_a_full_sort() -> None:
    """Without top-k the row's exponentials are float32 (the definition), sums float64."""
    rng = np.random.default_rng(3)
    logits = rng.normal(size=50_000).astype(np.float32) * 3
    probs = distribution(logits, SamplerSettings(temperature=1.0, top_p=0.9))
    weights = np.exp(logits - logits.max()).astype(np.float64)  # float32 exponentials
    total = np.add.reduceat(weights, np.arange(0, weights.size, 4096)).sum()  # as the sampler
    expected = _top_p_reference(weights / total, 0.9)
    np.testing.assert_allclose(probs, expected, rtol=1e-9, atol=1e-15)
    # float32 exponentials move no probability by more than float32's rounding
    exact = np.exp(logits.astype(np.float64) - logits.max())
    np.testing.assert_allclose(probs, _top_p_reference(exact / exact.sum(), 0.9), rtol=1e-6)


def test_min_p_drops_tokens_below_a_fraction_of_the_top() -> None:
    probs = distribution(LOGITS, SamplerSettings(temperature=1.0, min_p=0.3))
    # 0.3 × 0.4 = 0.12: keeps 0.4, 0.3, 0.15
    np.testing.assert_allclose(probs, [0, 0.4 / 0.85, 0, 0.3 / 0.85, 0.15 / 0.85], rtol=1e-6)


def test_top_k_applies_before_top_p() -> None:
    # top-k 3 leaves 0.4, 0.3, 0.15 (renormalised 0.47, 0.35, 0.18); top-p 0.8 then keeps two.
    # The other order (top-p first keeps 0.4, 0.3, 0.15; top-k 3 keeps them) would keep three.
    settings = SamplerSettings(temperature=1.0, top_k=3, top_p=0.8, min_p=0.3)
    np.testing.assert_allclose(
        distribution(LOGITS, settings), [0, 0.4 / 0.7, 0, 0.3 / 0.7, 0], rtol=1e-6
    )


def test_temperature_applies_before_top_p() -> None:
    # T=0.5 squares the probabilities (0.56, 0.32, 0.08, ...): top-p 0.8 keeps two tokens.
    # Applied to the untempered probabilities, top-p 0.8 would keep three.
    settings = SamplerSettings(temperature=0.5, top_p=0.8)
    np.testing.assert_allclose(
        distribution(LOGITS, settings), [0, 0.16 / 0.25, 0, 0.09 / 0.25, 0], rtol=1e-6
    )


def test_draw_follows_the_probabilities_and_never_picks_zero_mass() -> None:
    rng = np.random.default_rng(0)
    probs = np.array([0.0, 0.5, 0.0, 0.25, 0.25])
    counts = np.bincount([draw(probs, rng) for _ in range(20_000)], minlength=5)
    assert counts[0] == counts[2] == 0
    np.testing.assert_allclose(counts / counts.sum(), probs, atol=0.015)


def test_the_same_seed_gives_the_same_draws() -> None:
    probs = distribution(LOGITS, SamplerSettings(temperature=1.0))
    first = [draw(probs, np.random.default_rng(42)) for _ in range(5)]
    second = [draw(probs, np.random.default_rng(42)) for _ in range(5)]
    assert first == second


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"temperature": -1.0}, "temperature"),
        ({"top_k": -2}, "top-k"),
        ({"top_p": 0.0}, "top-p"),
        ({"top_p": 1.5}, "top-p"),
        ({"min_p": 1.0}, "min-p"),
    ],
)
def test_invalid_settings_are_clear_errors(settings: dict[str, float], message: str) -> None:
    with pytest.raises(RuntimeBackendError, match=message):
        SamplerSettings(**settings)
