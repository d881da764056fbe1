"""Prefix reuse with a Gemma 4 target and its drafter, across the sliding window.

A Gemma 4 target's sliding-window layers keep only the window (plus a batch) of the newest
positions (``swa_full`` off, as llama-server runs them; docs/architecture.md#kept-states), so a
state cut back further than the window lacks keys its next tokens read. The backend therefore
resumes such a model as it resumes a recurrent one: the live state where a prompt extends it, a
checkpoint of the window's cache, or a whole saved conversation — never a trim past the window.
The drafter holds nothing of its own (it reads the target's cache), so a kept state is the
target's plus the last hidden row.

Every reply below (plain and drafting, both pairs, in a conversation far longer than the
64-token window) is compared with the same request on a backend reset first: the prompt's last
logits and the drafter's first q rows agree to llama.cpp's batch-shape rounding, and the reply is
the fresh run's token for token, but where the fresh run itself is at a near-tie (two tokens
within that rounding) — the state behind it is then checked by the logits. The control shows
what the window costs: cutting the live state back instead gives logits far outside it.
"""

from __future__ import annotations

from collections.abc import Iterator

import llama_cpp
import numpy as np
import pytest

from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.request import GenerationRequest, GenerationResult
from app.engine.runtime.sampling.sampler import greedy_token
from app.engine.runtime.speculative.generation import generate, prompt_tokens
from tests.drafter.pairs import PAIRS, Pair
from tests.runtime.draft_rows import draft_rows

CONTEXT = 2048
"""Larger than the window's cache (64 + a 512-token batch, padded to 768 cells), so it drops
old positions."""
ROUNDING = 0.05
"""llama.cpp's batch-shape rounding on these models' logits (of order 10): the same tokens
prefilled in other batch splits differ by up to 0.035 (measured)."""
LONG = " ".join(["How do I read a file line by line in Python and count its words?"] * 30)


@pytest.fixture(scope="module", params=list(PAIRS.values()), ids=list(PAIRS))
def backends(request: pytest.FixtureRequest) -> Iterator[tuple[LlamaCppBackend, LlamaCppBackend]]:
    """The backend that keeps states, and a reference reset before every request."""
    pair: Pair = request.param
    settings = LoadSettings(threads=1, context_length=CONTEXT)
    kept, fresh = LlamaCppBackend(pair.target, settings), LlamaCppBackend(pair.target, settings)
    yield kept, fresh
    kept.close()
    fresh.close()


def _request(messages: list[ChatMessage], depth: int) -> GenerationRequest:
    return GenerationRequest(messages=tuple(messages), max_tokens=24, mtp_depth=depth)


def _ask(backend: LlamaCppBackend, messages: list[ChatMessage], depth: int) -> GenerationResult:
    return generate(
        backend, _request(messages, depth), emit=lambda _c: None, cancelled=lambda: False
    )


def _check_against_fresh(
    kept: LlamaCppBackend, fresh: LlamaCppBackend, messages: list[ChatMessage], depth: int
) -> tuple[GenerationResult, str]:
    """Ask ``kept`` (whatever it kept) and a reset ``fresh``; check the reply and the state."""
    reused = _ask(kept, messages, depth)
    source = kept.last_prefix_reuse.source
    fresh.reset()
    again = _ask(fresh, messages, depth)
    assert again.stats.prompt_reused_tokens == 0
    tokens = prompt_tokens(kept, _request(messages, depth))
    with_mtp = depth > 0
    ends = []
    for backend in (kept, fresh):  # the state right after the prompt, kept and fresh
        if backend is fresh:
            backend.reset()
        logits = backend.prefill(tokens, with_mtp=with_mtp)
        drafts = draft_rows(backend, greedy_token(logits), 3)[1] if with_mtp else np.zeros(0)
        ends.append((logits, drafts))
    (logits, drafts), (fresh_logits, fresh_drafts) = ends
    assert greedy_token(logits) == greedy_token(fresh_logits)
    assert float(np.abs(logits - fresh_logits).max()) < ROUNDING
    if with_mtp:
        assert float(np.abs(drafts - fresh_drafts).max()) < ROUNDING
    _assert_same_reply(fresh, tokens, reused, again)
    return reused, source


def _assert_same_reply(
    fresh: LlamaCppBackend, tokens: list[int], reused: GenerationResult, again: GenerationResult
) -> None:
    """The same tokens, but where the fresh run's two best tokens are within the rounding."""
    if reused.token_ids == again.token_ids:
        return
    pairs = zip(reused.token_ids, again.token_ids, strict=False)
    index = next(i for i, (a, b) in enumerate(pairs) if a != b)
    fresh.reset()
    logits = fresh.prefill([*tokens, *again.token_ids[:index]], with_mtp=False)
    best, second = np.sort(logits)[-2:][::-1]
    assert best - second < ROUNDING, f"replies differ at token {index} with no near-tie"
    assert reused.token_ids[index] in np.argsort(logits)[-2:]


@pytest.mark.slow
@pytest.mark.parametrize("depth", [0, 3], ids=["plain", "drafting depth 3"])
def test_a_conversation_past_the_window_resumes_as_a_fresh_run(
    backends: tuple[LlamaCppBackend, LlamaCppBackend], depth: int
) -> None:
    kept, fresh = backends
    kept.reset()
    window = 64
    messages = [ChatMessage("user", LONG)]
    first, _ = _check_against_fresh(kept, fresh, messages, depth)
    assert first.prompt_token_count > 10 * window
    messages += [ChatMessage("assistant", first.text), ChatMessage("user", "What does os do?")]
    # The next turn continues the live state.
    second, source = _check_against_fresh(kept, fresh, messages, depth)
    assert source == "live" and second.stats.prompt_reused_tokens > 10 * window
    # Regenerate and an edit of the last message resume from checkpoints of the window's cache.
    for variant in (messages, [*messages[:-1], ChatMessage("user", "What does sys do?")]):
        again, source = _check_against_fresh(kept, fresh, variant, depth)
        assert source == "checkpoint" and again.stats.prompt_reused_tokens > 10 * window
    # Another conversation displaces this one; coming back restores it whole.
    _check_against_fresh(kept, fresh, [ChatMessage("user", LONG[::-1])], depth)
    back, source = _check_against_fresh(kept, fresh, messages, depth)
    assert source == "saved" and back.stats.prompt_reused_tokens > 10 * window


def test_cutting_the_live_state_back_past_the_window_would_be_wrong(
    backends: tuple[LlamaCppBackend, LlamaCppBackend],
) -> None:
    """Why checkpoints: after a long prompt the window's cache has dropped old positions, so a
    state cut back to one of them (what the backend does for a model whose layers all keep
    every position) computes the next tokens without their keys. The backend recomputes
    instead; the cut is built here by reaching into the backend's kept states."""
    kept, fresh = backends
    prompt = kept.tokenize(LONG, parse_special=False)
    kept.reset()
    kept.prefill(prompt, with_mtp=True)
    oldest = llama_cpp.llama_memory_seq_pos_min(kept._decoder.lane.trunk.memory, 0)
    assert oldest > 64  # the window's cache holds no position before this one
    diverging = [*prompt[:oldest], *kept.tokenize(" and sort them", parse_special=False)]
    fresh.reset()
    wanted = fresh.prefill(diverging, with_mtp=True)
    differences = {}
    for cut_back in (False, True):
        kept.reset()
        kept.prefill(prompt, with_mtp=True)
        kept._decoder.kept.recurrent = not cut_back
        try:
            logits = kept.prefill(diverging, with_mtp=True)
        finally:
            kept._decoder.kept.recurrent = True
        differences[cut_back] = float(np.abs(logits - wanted).max())
        assert kept.last_prefix_reuse.source == ("trimmed" if cut_back else "")
    print(f"past the window: recomputed {differences[False]:.3g}, cut back {differences[True]:.3g}")
    assert differences[False] < ROUNDING
    assert differences[True] > 3 * ROUNDING
