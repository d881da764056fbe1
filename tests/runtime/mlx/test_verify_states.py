"""Per-token recurrent states captured in verify (mlx_verify_states) against the reference path
that restores the state from before the verify and re-runs the accepted tokens.

Two backends of the same model take the same cycles: one sets its gated-delta-net layers from
the states captured inside verify, the other re-runs. After every rollback their recurrent
arrays, KV offsets and next logits must agree; generate() must give the same greedy tokens and
acceptance, and plain decoding's tokens.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.models.cache import ArraysCache

from app.engine.runtime.backends.mlx.backend import MlxBackend
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.request import GenerationRequest, GenerationResult
from app.engine.runtime.sampling.sampler import SamplerSettings, greedy_token
from app.engine.runtime.speculative.generation import generate, prompt_tokens
from tests.runtime.draft_rows import draft_rows
from tests.runtime.mlx.conftest import DEMO_HF, SETTINGS
from tests.runtime.mlx.tiny_models import QWEN3_NEXT, write_qwen_sidecar, write_tiny_folder

GREEDY = SamplerSettings(temperature=0.0)
DEPTH = 3
PROMPT = "Tell me a short story about a lighthouse keeper."


@pytest.fixture(scope="module")
def rerun() -> Iterator[MlxBackend]:
    backend = MlxBackend(DEMO_HF, SETTINGS, per_token_states=False)
    yield backend
    backend.close()


def _recurrent_arrays(backend: MlxBackend) -> list[mx.array]:
    # the trunk's caches are internal; comparing them is the point of this test
    return [
        array
        for cache in backend._live.trunk
        if isinstance(cache, ArraysCache)
        for array in cache.cache
    ]


def _kv_offsets(backend: MlxBackend) -> list[int]:
    return [cache.offset for cache in backend._live.trunk if not isinstance(cache, ArraysCache)]


def _generate(backend: MlxBackend, prompt: str, depth: int) -> GenerationResult:
    request = GenerationRequest(
        messages=(ChatMessage("user", prompt),), max_tokens=24, sampler=GREEDY, mtp_depth=depth
    )
    backend.reset()
    return generate(backend, request, emit=lambda _chunk: None, cancelled=lambda: False)


@pytest.mark.slow
def test_captured_states_equal_the_rerun_after_every_rollback(
    bf16: MlxBackend, rerun: MlxBackend
) -> None:
    prompt = prompt_tokens(
        bf16, GenerationRequest(messages=(ChatMessage("user", PROMPT),), sampler=GREEDY)
    )
    backends = (bf16, rerun)
    assert bf16._capturers and not rerun._capturers  # one captures, the other re-runs
    last = 0
    for backend in backends:
        backend.reset()
        last = greedy_token(backend.prefill(prompt, with_mtp=True))
    partial = rejected = 0
    worst_state = worst_logits = 0.0
    for _ in range(12):
        drafts = [b.draft(last, DEPTH, lambda _i, row: greedy_token(row)).tokens for b in backends]
        assert drafts[0] == drafts[1]
        verified = [b.verify([last, *drafts[0]]).logits for b in backends]
        worst_logits = max(worst_logits, float(np.max(np.abs(verified[0] - verified[1]))))
        targets = [greedy_token(row) for row in verified[0]]
        accepted = next((i for i, d in enumerate(drafts[0]) if d != targets[i]), len(drafts[0]))
        partial += 0 < accepted < DEPTH
        rejected += accepted == 0
        start = bf16.committed_length - DEPTH - 1
        for backend in backends:
            backend.rollback(start + accepted + 1)
        assert _kv_offsets(bf16) == _kv_offsets(rerun)
        for captured, replayed in zip(
            _recurrent_arrays(bf16), _recurrent_arrays(rerun), strict=True
        ):
            assert captured.shape == replayed.shape and captured.dtype == replayed.dtype
            worst_state = max(worst_state, float(mx.max(mx.abs(captured - replayed)).item()))
        last = targets[accepted]
    print(
        f"captured vs re-run over 12 cycles ({partial} partial, {rejected} all rejected): max "
        f"abs diff of the recurrent states {worst_state:.3g}, of the verify logits "
        f"{worst_logits:.3g}"
    )
    assert partial > 0 and rejected > 0, "the cycles must include partial and full rejections"
    # mlx on the CPU runs the recurrence of one token the same way in both paths
    assert worst_state == 0.0 and worst_logits == 0.0
    step = [draft_rows(b, last, 1)[1] for b in backends]
    assert np.array_equal(step[0], step[1])


@pytest.mark.slow
def test_greedy_tokens_through_generate_equal_the_rerun_path_and_plain_decoding(
    bf16: MlxBackend, rerun: MlxBackend
) -> None:
    plain = _generate(bf16, PROMPT, 0)
    captured = _generate(bf16, PROMPT, DEPTH)
    replayed = _generate(rerun, PROMPT, DEPTH)
    assert captured.token_ids == replayed.token_ids == plain.token_ids
    assert captured.stats.accepted_by_depth == replayed.stats.accepted_by_depth
    drafted, accepted = captured.stats.drafted_by_depth, captured.stats.accepted_by_depth
    assert sum(drafted) > sum(accepted) > 0


def test_a_qwen3_next_trunk_captures_states_too(tmp_path: Path) -> None:
    folder = write_tiny_folder(tmp_path / "qwen3_next", QWEN3_NEXT)
    sidecar = write_qwen_sidecar(tmp_path / "mtp.safetensors", QWEN3_NEXT)
    captured_backend = MlxBackend(folder, SETTINGS, sidecar)
    replayed_backend = MlxBackend(folder, SETTINGS, sidecar, per_token_states=False)
    assert captured_backend._capturers and not replayed_backend._capturers
    plain = _generate(captured_backend, "Once upon a time", 0)
    captured = _generate(captured_backend, "Once upon a time", DEPTH)
    replayed = _generate(replayed_backend, "Once upon a time", DEPTH)
    assert captured.token_ids == replayed.token_ids == plain.token_ids
    assert captured.stats.accepted_by_depth == replayed.stats.accepted_by_depth
    assert _recurrent_arrays(captured_backend)
    for first, second in zip(
        _recurrent_arrays(captured_backend), _recurrent_arrays(replayed_backend), strict=True
    ):
        assert mx.array_equal(first, second)
