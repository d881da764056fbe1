"""Log-probabilities and ``min_tokens`` on MLX (the demo's BF16 folder, mlx's CPU build): the
loop is the one llama.cpp runs, so a speculative reply's figures come from the target's verify
rows and equal plain decoding's (docs/server-api.md#log-probabilities)."""

from __future__ import annotations

import numpy as np
import pytest

from app.engine.runtime.backends.mlx.backend import MlxBackend
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.request import GenerationRequest, GenerationResult
from app.engine.runtime.sampling.logprobs import LogprobReader
from app.engine.runtime.speculative.generation import generate

TOLERANCE = 1e-4
STORY = (ChatMessage("user", "Tell me a story about a dragon."),)


def _run(backend: MlxBackend, depth: int, **fields: object) -> GenerationResult:
    fields = {"max_tokens": 24, **fields}
    request = GenerationRequest(messages=STORY, mtp_depth=depth, **fields)
    return generate(backend, request, emit=lambda _chunk: None, cancelled=lambda: False)


@pytest.mark.slow
def test_greedy_speculative_logprobs_equal_plain_decoding(bf16: MlxBackend) -> None:
    plain = _run(bf16, 0, logprobs=3)
    drafted = _run(bf16, 2, logprobs=3)
    assert drafted.token_ids == plain.token_ids
    assert drafted.stats.accepted_by_depth[0] > 0
    assert len(drafted.logprobs) == len(drafted.token_ids)
    differences = [
        abs(a.logprob - b.logprob)
        for one, other in zip(plain.logprobs, drafted.logprobs, strict=True)
        for a, b in zip((one, *one.top), (other, *other.top), strict=True)
    ]
    assert max(differences) <= TOLERANCE
    for entry in drafted.logprobs:
        assert entry.top[0].token == entry.token and entry.logprob <= 0
        assert sum(np.exp(top.logprob) for top in entry.top) <= 1 + 1e-6


@pytest.mark.slow
def test_min_tokens_holds_the_end_back_exactly_on_mlx(bf16: MlxBackend) -> None:
    free = _run(bf16, 0, max_tokens=80)
    assert free.finish_reason == "stop"  # the story ends by itself ...
    least = len(free.token_ids) + 4
    plain = _run(bf16, 0, max_tokens=80, min_tokens=least)
    drafted = _run(bf16, 2, max_tokens=80, min_tokens=least)
    assert len(plain.token_ids) >= least  # ... and not before min_tokens with it
    assert not any(bf16.is_end_of_generation(token) for token in plain.token_ids)
    assert drafted.token_ids == plain.token_ids


def test_special_tokens_among_alternatives_are_shown_by_name_on_mlx(bf16: MlxBackend) -> None:
    (im_end,) = bf16.tokenize("<|im_end|>", parse_special=True)
    (word,) = bf16.tokenize("the", parse_special=False)
    row = np.zeros(bf16.info.vocab_size, dtype=np.float32)
    row[[im_end, word]] = [6.0, 5.0]
    entry = LogprobReader(bf16.token_bytes, bf16.token_text, 2).read(row, word)
    assert [(top.text, top.piece) for top in entry.top] == [("<|im_end|>", b""), ("the", b"the")]
