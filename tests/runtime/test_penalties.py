"""Penalties and logit bias in the one sampler: the sparse edits give exactly what writing the
penalised logits into a copy of the row and sampling that gives (llama.cpp's rule, written out
plainly here), the counts follow pushes and pops (a rolled-back draft leaves no trace), and a
banned token gets no probability."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.sampling.penalties import Penalties
from app.engine.runtime.sampling.sampler import (
    SamplerSettings,
    distribution,
    greedy_token,
    sample,
)

VOCAB = 3000


def _penalised_copy(
    logits: np.ndarray, settings: SamplerSettings, prompt: list[int], reply: list[int]
) -> np.ndarray:
    """The row with every penalty and bias written in, token by token, as llama.cpp does."""
    row = logits.astype(np.float64)
    for token, bias in settings.logit_bias:
        row[token] = -np.inf if bias <= -100 else row[token] + bias
    window = (
        Counter((prompt + reply)[-settings.penalty_window :]) if settings.penalty_window else {}
    )
    for token in window:
        if settings.repetition_penalty != 1.0:
            factor = settings.repetition_penalty
            row[token] = row[token] * factor if row[token] <= 0 else row[token] / factor
    for token, count in Counter(reply).items():
        row[token] -= count * settings.frequency_penalty + settings.presence_penalty
    return row.astype(np.float32)


SETTINGS = [
    SamplerSettings(temperature=0.0, repetition_penalty=1.3, logit_bias=((5, -100.0),)),
    SamplerSettings(temperature=0.8, presence_penalty=0.7, frequency_penalty=0.4),
    SamplerSettings(temperature=1.5, repetition_penalty=1.3, penalty_window=16),
    SamplerSettings(temperature=1.0, top_k=12, repetition_penalty=1.5, logit_bias=((7, 3.0),)),
    SamplerSettings(temperature=1.2, top_p=0.8, min_p=0.05, frequency_penalty=1.5),
    SamplerSettings(
        temperature=0.7,
        top_k=40,
        min_p=0.02,
        presence_penalty=-0.5,
        repetition_penalty=0.8,
        penalty_window=8,
        logit_bias=((1, -100.0), (2, 100.0), (2999, -4.0)),
    ),
]


@pytest.mark.parametrize("settings", SETTINGS, ids=range(len(SETTINGS)))
def test_sparse_edits_sample_the_penalised_row(settings: SamplerSettings) -> None:
    rng = np.random.default_rng(5)
    for trial in range(20):
        logits = (rng.standard_normal(VOCAB) * 3).astype(np.float32)
        # Many of the likeliest tokens occurred, so the penalties move the top; the others'
        # logits are negative as often as not (the repetition penalty's two cases).
        prompt = [int(t) for t in rng.integers(0, 40, size=30)]
        reply = [int(t) for t in rng.integers(0, 40, size=trial)]
        logits[(prompt + reply)[::3]] += 6
        penalties = Penalties(settings, prompt, VOCAB)
        penalties.push_all(reply)
        edits = penalties.edits()
        reference = _penalised_copy(logits, settings, prompt, reply)
        if settings.greedy:
            assert greedy_token(logits, edits) == greedy_token(reference)
        probs = distribution(logits, settings, edits)
        assert np.allclose(probs, distribution(reference, settings), rtol=1e-5, atol=1e-9)


def test_a_banned_token_gets_no_probability_even_as_the_likeliest() -> None:
    logits = np.zeros(VOCAB, np.float32)
    logits[42] = 50.0
    for temperature in (0.0, 1.0, 5.0):
        settings = SamplerSettings(temperature=temperature, logit_bias=((42, -100.0),))
        edits = Penalties(settings, [], VOCAB).edits()
        assert distribution(logits, settings, edits)[42] == 0.0
        rng = np.random.default_rng(0)
        assert all(sample(logits, settings, rng, edits) != 42 for _ in range(200))


def test_rolled_back_drafts_leave_the_counts_as_they_were() -> None:
    settings = SamplerSettings(
        temperature=1.0, repetition_penalty=1.2, penalty_window=5, frequency_penalty=0.3
    )
    prompt = [1, 2, 3, 4, 5, 6, 7]
    penalties = Penalties(settings, prompt, VOCAB)
    penalties.push_all([8, 9])
    before = penalties.edits()
    penalties.push_all([10, 1, 1, 11])
    assert not np.array_equal(penalties.edits().ids, before.ids)
    penalties.pop(4)
    after = penalties.edits()
    row = np.random.default_rng(1).standard_normal(VOCAB).astype(np.float32)
    assert np.array_equal(distribution(row, settings, after), distribution(row, settings, before))
    assert set(after.ids[after.repeat != 1].tolist()) == {5, 6, 7, 8, 9}  # the last 5
    assert set(after.ids[after.subtract != 0].tolist()) == {8, 9}


def test_the_window_reaches_into_the_prompt_and_the_reply_counts_only_the_reply() -> None:
    settings = SamplerSettings(
        temperature=1.0, repetition_penalty=2.0, penalty_window=4, presence_penalty=1.0
    )
    penalties = Penalties(settings, [100, 101, 102, 103, 104], VOCAB)
    penalties.push(200)
    edits = penalties.edits()
    repeated = set(edits.ids[edits.repeat == 2.0].tolist())
    assert repeated == {102, 103, 104, 200}  # the last 4 of prompt + reply
    assert set(edits.ids[edits.subtract == 1.0].tolist()) == {200}  # presence: the reply only


def test_no_option_means_no_edits() -> None:
    penalties = Penalties(SamplerSettings(temperature=1.0, top_k=5), [1, 2, 3], VOCAB)
    penalties.push(4)
    assert not penalties.active and penalties.edits() is None


def test_bad_values_are_refused_with_the_field_named() -> None:
    with pytest.raises(RuntimeBackendError, match="presence_penalty 3"):
        SamplerSettings(presence_penalty=3.0)
    with pytest.raises(RuntimeBackendError, match="repetition penalty 0"):
        SamplerSettings(repetition_penalty=0.0)
    with pytest.raises(RuntimeBackendError, match="logit bias 150"):
        SamplerSettings(logit_bias=((3, 150.0),))
    with pytest.raises(RuntimeBackendError, match="logit_bias names token 5000"):
        Penalties(SamplerSettings(logit_bias=((5000, 1.0),)), [], VOCAB)
