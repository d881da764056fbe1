"""The MLX backend drafts with a separate Gemma 4 drafter, exactly.

Each tiny pair's target is converted with ``mlx_lm.convert`` (8-bit, as MLX conversions are
published) into a folder with the drafter's checkpoint beside it, as a user who downloaded an MLX
target and Google's ``-it-assistant`` would have them; the backend finds the drafter there. The
prompts are longer than the pairs' 64-token sliding window, so every rollback cuts the
un-rotated window caches back past a wrap of mlx-lm's own rotating buffer. The drafts through
the backend are compared with transformers' (in float32, on the BF16 checkpoint the reference was
computed from). CPU mlx is slow: the conversations are short.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm import convert

from app.engine.runtime.backends.mlx.backend import MlxBackend
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.request import GenerationRequest, GenerationResult
from app.engine.runtime.sampling.sampler import greedy_token
from app.engine.runtime.speculative.generation import generate
from tests.drafter.pairs import PAIRS, Pair
from tests.runtime.draft_rows import draft_rows

SETTINGS = LoadSettings(context_length=1024)
TOLERANCE = 1e-4
"""Max |Δlogit| against transformers 5.23 in float32 (as in test_gemma_drafter.py)."""
LONG_QUESTION = (
    "I have a text file with one record per line, each record a name, a comma and a number. "
    "How do I read the file line by line in Python, skip empty lines, split every record at the "
    "comma, convert the number, and print the names sorted by their numbers?"
)


@pytest.fixture(scope="module", params=list(PAIRS.values()), ids=list(PAIRS))
def converted(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Pair, Path, MlxBackend]]:
    pair: Pair = request.param
    root = tmp_path_factory.mktemp(f"gemma4-{pair.kind}-mlx")
    target = root / f"gemma4-tiny-{pair.kind}-mlx-8bit"
    convert(str(pair.hf_target), mlx_path=str(target), quantize=True, q_bits=8, q_group_size=64)
    shutil.copytree(pair.hf_drafter, root / f"gemma4-tiny-{pair.kind}-assistant")
    backend = MlxBackend(target, SETTINGS)
    yield pair, root / f"gemma4-tiny-{pair.kind}-assistant", backend
    backend.close()


def _ask(backend: MlxBackend, messages: list[ChatMessage], depth: int) -> GenerationResult:
    request = GenerationRequest(messages=tuple(messages), max_tokens=32, mtp_depth=depth)
    return generate(backend, request, emit=lambda _c: None, cancelled=lambda: False)


@pytest.mark.slow
def test_greedy_drafting_on_mlx_is_plain_decoding(
    converted: tuple[Pair, Path, MlxBackend],
) -> None:
    _pair, drafter, backend = converted
    assert backend.info.drafter == drafter and backend.info.mtp_layers == 4
    rejected = partial = full = 0
    messages = [ChatMessage("user", LONG_QUESTION)]
    for depth in (1, 3):
        backend.reset()
        plain = _ask(backend, messages, 0)
        assert plain.prompt_token_count > 64  # past the sliding window
        backend.reset()
        drafted = _ask(backend, messages, depth)
        assert drafted.token_ids == plain.token_ids, depth
        stats = drafted.stats
        rejected += stats.cycles - stats.accepted_by_depth[0]
        partial += stats.accepted_by_depth[0] - stats.accepted_by_depth[-1]
        full += stats.accepted_by_depth[-1]
    assert rejected > 0 and partial > 0 and full > 0


@pytest.mark.slow
def test_the_next_turn_and_an_edit_reuse_the_kept_state_exactly(
    converted: tuple[Pair, Path, MlxBackend],
) -> None:
    """A conversation's next turn continues the live state and an edit of its last message
    cuts the un-rotated window back: both reply as a fresh run, token for token."""
    _pair, _drafter, backend = converted
    backend.reset()
    messages = [ChatMessage("user", LONG_QUESTION)]
    first = _ask(backend, messages, 3)
    messages += [ChatMessage("assistant", first.text), ChatMessage("user", "And with csv?")]
    for variant, source in (
        (messages, "live"),
        ([*messages[:-1], ChatMessage("user", "And with json?")], "trimmed"),
    ):
        reused = _ask(backend, variant, 3)
        assert backend.last_prefix_reuse.source == source
        assert reused.stats.prompt_reused_tokens > 64
        backend.reset()
        fresh = _ask(backend, variant, 3)
        assert reused.token_ids == fresh.token_ids
        backend.reset()
        _ask(backend, messages[:1], 3)  # the conversation as it was before the variant
        _ask(backend, messages, 3)


@pytest.mark.parametrize("pair", PAIRS.values(), ids=PAIRS)
def test_the_backend_drafts_what_transformers_drafts(pair: Pair) -> None:
    """Through the backend's own prefill and draft, in float32 on the BF16 checkpoint: the q
    rows of three steps fed transformers' choices equal transformers' (the centroid head's
    masked rows too), one prompt longer than the window."""
    backend = MlxBackend(pair.hf_target, SETTINGS)
    try:
        # float32 for the comparison; reaching into the backend only to set the dtype.
        backend._model.set_dtype(mx.float32)
        backend._drafter.drafter.set_dtype(mx.float32)
        reference = np.load(pair.reference)
        worst = 0.0
        for index in range(3):
            prompt = reference[f"prompt_{index}"].tolist()
            backend.reset()
            first = int(reference[f"first_{index}"])
            assert greedy_token(backend.prefill(prompt, with_mtp=True)) == first
            wanted = reference[f"drafted_{index}"].tolist()
            _, rows = draft_rows(backend, first, len(wanted), lambda step, _row, w=wanted: w[step])
            worst = max(worst, float(np.abs(rows - reference[f"logits_{index}"]).max()))
        assert max(len(reference[f"prompt_{i}"]) for i in range(3)) > 64
    finally:
        backend.close()
    print(f"{pair.kind}: MLX backend drafts vs transformers max |Δlogit| {worst:.2e}")
    assert worst < TOLERANCE
