"""The decoding loop's sparse sampler path gives what the dense, vocabulary-wide definition gives.

The loop keeps only the top-k candidates of each row (``sparse_distribution``); the math tests
and the sampler's definition use dense rows. Here both are compared with a plain full-sort
reference, and the acceptance law is run on both forms with the same seeds: the tokens drawn
must be the same, not just equally distributed.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.sampling.acceptance import accept_by_matching, accept_leviathan_chen
from app.engine.runtime.sampling.candidates import top_k_ids
from app.engine.runtime.sampling.distribution import draw
from app.engine.runtime.sampling.sampler import (
    SamplerSettings,
    distribution,
    sparse_distribution,
)

VOCAB = 4096
SETTINGS = [
    SamplerSettings(temperature=0.6),
    SamplerSettings(temperature=0.6, top_k=20, top_p=0.95),
    SamplerSettings(temperature=1.0, top_k=40),
    SamplerSettings(temperature=0.8, top_k=64, top_p=0.9, min_p=0.05),
    SamplerSettings(temperature=1.3, top_p=0.5),
    SamplerSettings(temperature=0.7, min_p=0.1),
    SamplerSettings(temperature=0.0),
]
IDS = ["T only", "chat defaults", "top-k", "all filters", "top-p only", "min-p only", "greedy"]


def _rows(count: int, seed: int) -> np.ndarray:
    """Logits rows like a model's: a few strong tokens over a broad tail; every third row
    rounded so ties at the k-th value occur."""
    rng = np.random.default_rng(seed)
    rows = rng.normal(size=(count, VOCAB)) * 2.5
    rows[:, rng.integers(0, VOCAB, size=8)] += 6.0
    rows[::3] = np.round(rows[::3])
    return rows.astype(np.float32)


def _block_total(probs: np.ndarray) -> float:
    """The sum as the sampler takes it: per block of 4096, then the blocks (float64)."""
    return float(np.add.reduceat(probs, np.arange(0, probs.size, 4096)).sum())


def _reference(logits: np.ndarray, settings: SamplerSettings) -> np.ndarray:
    """temperature → top-k → top-p → min-p with full stable sorts over the vocabulary; the
    exponentials in float64 over top-k candidates, in float32 over the whole row (the
    definition's precision), every sum in float64."""
    probs = np.zeros(logits.size)
    if settings.greedy:
        probs[int(np.argmax(logits))] = 1.0
        return probs
    if settings.top_k:
        scaled = logits.astype(np.float64) / settings.temperature
        kth = np.sort(scaled)[::-1][settings.top_k - 1]
        probs = np.where(scaled >= kth, np.exp(scaled - scaled.max()), 0.0)
    else:
        scaled = (logits - logits.max()).astype(np.float32) / np.float32(settings.temperature)
        probs = np.exp(scaled).astype(np.float64)
    probs /= _block_total(probs)
    if settings.top_p < 1.0:
        order = np.argsort(-probs, kind="stable")
        count = int(np.searchsorted(np.cumsum(probs[order]), settings.top_p)) + 1
        kept = np.zeros(logits.size, dtype=bool)
        kept[order[:count]] = True
        probs = np.where(kept, probs, 0.0)
        probs /= probs.sum()
    if settings.min_p > 0:
        probs[probs < settings.min_p * probs.max()] = 0.0
        probs /= probs.sum()
    return probs


@pytest.mark.parametrize("settings", SETTINGS, ids=IDS)
def test_the_sparse_distribution_is_the_full_sort_reference(settings: SamplerSettings) -> None:
    for logits in _rows(12, seed=1):
        sparse = sparse_distribution(logits, settings)
        expected = _reference(logits, settings)
        assert np.all(np.diff(sparse.tokens) > 0)  # ascending ids
        assert set(np.flatnonzero(expected)) <= set(sparse.tokens.tolist())
        np.testing.assert_allclose(sparse.dense(VOCAB), expected, rtol=1e-9, atol=1e-15)
        assert np.array_equal(sparse.dense(VOCAB), distribution(logits, settings))


@pytest.mark.parametrize("settings", SETTINGS, ids=IDS)
def test_sparse_and_dense_rows_draw_the_same_tokens(settings: SamplerSettings) -> None:
    rows = _rows(4, seed=2)
    for seed in range(50):
        for logits in rows:
            sparse = sparse_distribution(logits, settings)
            dense = distribution(logits, settings)
            assert draw(sparse, np.random.default_rng(seed)) == draw(
                dense, np.random.default_rng(seed)
            )


@pytest.mark.parametrize("settings", SETTINGS[:4], ids=IDS[:4])
def test_the_acceptance_laws_decide_the_same_on_sparse_and_dense_rows(
    settings: SamplerSettings,
) -> None:
    """Drafts from a head that is close to the target (q rows: perturbed p logits), depth 3."""
    target_rows = _rows(4, seed=3)
    head_rows = target_rows[:3] + np.random.default_rng(4).normal(size=(3, VOCAB)).astype(
        np.float32
    )
    q_sparse = [sparse_distribution(row, settings) for row in head_rows]
    p_sparse = [sparse_distribution(row, settings) for row in target_rows]
    q_dense = [q.dense(VOCAB) for q in q_sparse]
    p_dense = [p.dense(VOCAB) for p in p_sparse]
    outcomes = set()
    for seed in range(300):
        drafts = [draw(q, np.random.default_rng(seed + depth)) for depth, q in enumerate(q_sparse)]
        sparse_lc = accept_leviathan_chen(drafts, q_sparse, p_sparse, np.random.default_rng(seed))
        dense_lc = accept_leviathan_chen(drafts, q_dense, p_dense, np.random.default_rng(seed))
        assert sparse_lc == dense_lc
        sparse_match = accept_by_matching(drafts, p_sparse, np.random.default_rng(seed))
        assert sparse_match == accept_by_matching(drafts, p_dense, np.random.default_rng(seed))
        outcomes.add(sparse_lc.accepted)
    assert {0, 3} <= outcomes  # rejections (residual draws) and full acceptances both compared


WIDE = 262_144


def _wide_row(seed: int, *, tied_tail: bool) -> np.ndarray:
    """A row as wide as a real vocabulary: a model's 4096 logits, then a tail tied at 0 (the
    vocabulary stand-in's padding, and unused vocabulary slots) or spread below them."""
    rng = np.random.default_rng(seed)
    row = np.zeros(WIDE, dtype=np.float32)
    if not tied_tail:
        row[:] = rng.normal(size=WIDE) * 2.0 - 4.0
    row[:VOCAB] = _rows(1, seed)[0] + 3.0
    return row


@pytest.mark.parametrize("tied_tail", [True, False], ids=["tied tail", "spread tail"])
def test_top_k_on_a_wide_row_is_the_full_sort_one(tied_tail: bool) -> None:
    for seed in range(3):
        row = _wide_row(seed, tied_tail=tied_tail)
        for k in (1, 20, 40, 1000):
            kth = np.sort(row)[::-1][k - 1]
            assert np.array_equal(top_k_ids(row, k), np.flatnonzero(row >= kth))
    tied = np.zeros(WIDE, dtype=np.float32)
    tied[:5] = 1.0  # the 20th largest is the tied value: all of them are kept
    assert top_k_ids(tied, 20).size == WIDE


@pytest.mark.parametrize("size", [152_064, 151_936, 262_144 + 77], ids=["Qwen", "ragged", "odd"])
def test_top_k_is_the_full_sort_one_however_the_row_divides(size: int) -> None:
    """Vocabulary sizes that fill the top-k grid exactly and that leave tokens past it (a
    strong token among them), with the k-th largest value shared by many tokens or not."""
    rng = np.random.default_rng(size)
    for shared in (False, True):
        row = (rng.normal(size=size) * 2.0).astype(np.float32)
        row[-3] = 30.0  # past the grid when the size does not divide
        if shared:
            row[rng.integers(0, size, size=500)] = np.sort(row)[-10]
        for k in (1, 5, 20, 40):
            kth = np.sort(row)[::-1][k - 1]
            assert np.array_equal(top_k_ids(row, k), np.flatnonzero(row >= kth))


def test_a_row_with_a_nan_is_refused_with_top_k_on() -> None:
    row = _wide_row(7, tied_tail=False)
    row[123_456] = np.nan
    assert top_k_ids(row, 20).tolist() == [123_456]
    with pytest.raises(RuntimeBackendError, match="not numbers"):
        sparse_distribution(row, SamplerSettings(temperature=0.6, top_k=20))


@pytest.mark.parametrize("settings", SETTINGS[:-1], ids=IDS[:-1])
def test_the_sampler_on_a_wide_row_is_the_full_sort_reference(settings: SamplerSettings) -> None:
    row = _wide_row(5, tied_tail=False)
    expected = _reference(row, settings)
    sparse = sparse_distribution(row, settings)
    np.testing.assert_allclose(sparse.dense(WIDE), expected, rtol=1e-9, atol=1e-15)


def test_a_draw_from_a_wide_row_walks_the_cumulative_sum_of_the_whole_row() -> None:
    """Blocks first, then one block: the token a single cumulative sum over the row gives for
    the same uniform number, and never a token of zero weight."""
    row = _wide_row(6, tied_tail=False)
    probs = sparse_distribution(row, SamplerSettings(temperature=1.0))
    weights = probs.probs.astype(np.float64)
    weights[::7] = 0.0  # zero-weight tokens, including some at block edges
    cumulative = np.cumsum(weights)
    for seed in range(2000):
        uniform = np.random.default_rng(seed).random()
        expected = int(np.searchsorted(cumulative, uniform * cumulative[-1], side="right"))
        token = draw(weights, np.random.default_rng(seed))
        assert token == expected and weights[token] > 0
