"""Penalties and logit bias on the MLX backend (the demo's BF16 folder with its own head): the
drafts and the verify rows are shaped by the same counts, so greedy MTP output with penalties is
plain greedy output with them, and a banned token is never written
(docs/architecture.md#penalties-and-logit-bias)."""

from __future__ import annotations

from collections import Counter

import pytest

from app.engine.runtime.backends.mlx.backend import MlxBackend
from app.engine.runtime.core.request import GenerationRequest, GenerationResult
from app.engine.runtime.sampling.sampler import SamplerSettings
from app.engine.runtime.speculative.generation import generate

PROMPTS = ("def add(a, b):\n", "x = [1, 2, 3", "if x == 1:\n")
PENALISED = SamplerSettings(
    temperature=0.0,
    repetition_penalty=1.3,
    frequency_penalty=0.6,
    presence_penalty=0.4,
    logit_bias=((11, 1.5),),
)
TOKENS = 32


def _run(
    backend: MlxBackend, prompt: str, sampler: SamplerSettings, depth: int
) -> GenerationResult:
    request = GenerationRequest(prompt=prompt, max_tokens=TOKENS, sampler=sampler, mtp_depth=depth)
    return generate(backend, request, emit=lambda _chunk: None, cancelled=lambda: False)


@pytest.mark.slow
def test_greedy_mtp_with_penalties_is_plain_greedy_with_them(bf16: MlxBackend) -> None:
    rejected = changed = 0
    for prompt in PROMPTS:
        plain = _run(bf16, prompt, PENALISED, 0)
        changed += plain.token_ids != _run(bf16, prompt, SamplerSettings(), 0).token_ids
        for depth in (2, 3):
            speculative = _run(bf16, prompt, PENALISED, depth)
            assert speculative.token_ids == plain.token_ids, (prompt, depth)
            rejected += speculative.stats.cycles - speculative.stats.accepted_by_depth[0]
    assert changed >= 2, "the penalties must change the greedy replies"
    assert rejected > 0


@pytest.mark.slow
def test_a_banned_token_is_never_written(bf16: MlxBackend) -> None:
    plain = _run(bf16, PROMPTS[1], SamplerSettings(), 0)
    banned = Counter(plain.token_ids).most_common(1)[0][0]
    assert plain.token_ids.count(banned) >= 3
    for temperature, depth in ((0.0, 3), (1.0, 3), (1.0, 0)):
        sampler = SamplerSettings(temperature=temperature, seed=1, logit_bias=((banned, -100.0),))
        assert banned not in _run(bf16, PROMPTS[1], sampler, depth).token_ids
