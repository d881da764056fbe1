"""Prefix reuse on real llama.cpp: a reply computed from kept state is a fresh process's reply.

The tiny qwen35 model is hybrid (gated-delta-net layers that cannot be rewound, plus attention
layers), so every way back into a conversation is exercised: continuing the live state (the
next turn), a checkpoint inside it (Regenerate, an edit), a whole saved state (a conversation
switched away from and back to), and a checkpoint deep inside a prompt longer than the
checkpoint interval. Each reply is compared, token for token, with the same request on a backend
that was reset first (a fresh computation), for plain decoding and for MTP decoding.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.backends.prefix_cache import CHECKPOINT_INTERVAL
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.backend import LoadSettings, PrefixReuse
from app.engine.runtime.core.request import GenerationRequest, GenerationResult
from app.engine.runtime.sampling.sampler import greedy_token
from app.engine.runtime.speculative.depth_policy import AdaptiveDepth, DepthPolicies
from app.engine.runtime.speculative.generation import LANE_SWITCH_TOKENS, generate
from tests.runtime.draft_rows import draft_rows

WORDS = "the sea is calm tonight and the tide is full the moon lies fair upon the straits"


@pytest.fixture(scope="module")
def reference(tiny_models: dict[str, Path]) -> Iterator[LlamaCppBackend]:
    """A second backend on the same file, reset before every request: a fresh computation."""
    loaded = LlamaCppBackend(tiny_models["mtp"], LoadSettings(threads=1, context_length=4096))
    yield loaded
    loaded.close()


@pytest.fixture(scope="module")
def long_backend(tiny_models: dict[str, Path]) -> Iterator[LlamaCppBackend]:
    loaded = LlamaCppBackend(tiny_models["mtp"], LoadSettings(threads=1, context_length=4096))
    yield loaded
    loaded.close()


def _ask(backend: LlamaCppBackend, messages: list[ChatMessage], depth: int) -> GenerationResult:
    request = GenerationRequest(messages=tuple(messages), max_tokens=24, mtp_depth=depth)
    return generate(backend, request, emit=lambda _chunk: None, cancelled=lambda: False)


def _text(words: int, offset: int = 0) -> str:
    words_of = WORDS.split(" ")
    return " ".join(words_of[(offset + index) % len(words_of)] for index in range(words))


def _same_as_fresh(
    backend: LlamaCppBackend,
    reference: LlamaCppBackend,
    messages: list[ChatMessage],
    depth: int,
) -> GenerationResult:
    """Ask with whatever ``backend`` kept, and ask ``reference`` after a reset: same reply."""
    reused = _ask(backend, messages, depth)
    reference.reset()
    fresh = _ask(reference, messages, depth)
    assert reused.stats.prompt_reused_tokens > 0 or not backend.last_prefix_reuse.source
    assert fresh.stats.prompt_reused_tokens == 0
    assert reused.token_ids == fresh.token_ids
    assert reused.text == fresh.text
    return reused


@pytest.mark.parametrize("depth", [0, 2], ids=["plain", "MTP depth 2"])
def test_each_turn_reuses_the_conversation_so_far_and_replies_as_a_fresh_run(
    backend: LlamaCppBackend, reference: LlamaCppBackend, depth: int
) -> None:
    backend.reset()
    messages = [ChatMessage("user", _text(40))]
    previous_prompt_tokens = 0
    for turn in range(4):
        reply = _same_as_fresh(backend, reference, messages, depth)
        prompt_tokens = reply.prompt_token_count
        if turn:
            # Everything up to the last reply was kept. (This random model's replies are byte
            # soup that tokenises differently when the template renders them again, so the
            # reuse stops where the reply starts; the next test continues a reply's own tokens.)
            assert reply.stats.prompt_reused_tokens >= previous_prompt_tokens - 1, turn + 1
        messages += [ChatMessage("assistant", reply.text), ChatMessage("user", _text(9, turn))]
        previous_prompt_tokens = prompt_tokens


@pytest.mark.parametrize("depth", [0, 3], ids=["plain", "MTP depth 3"])
def test_a_prompt_that_extends_the_last_reply_continues_the_live_state(
    backend: LlamaCppBackend, reference: LlamaCppBackend, depth: int
) -> None:
    """The next turn starts where the reply ended: the trunk, the MTP head's cache and the rows
    it still had queued carry on, and the head drafts what it drafts after a fresh prefill."""
    backend.reset()
    prompt = backend.tokenize(_text(30, 1), parse_special=False)
    request = GenerationRequest(prompt=_text(30, 1), max_tokens=40, mtp_depth=depth)
    reply = generate(backend, request, emit=lambda _chunk: None, cancelled=lambda: False)
    assert reply.finish_reason == "length"
    following = [*prompt, *reply.token_ids, *backend.tokenize(" " + _text(9), parse_special=False)]

    with_mtp = depth > 0
    logits = backend.prefill(following, with_mtp=with_mtp)
    assert backend.last_prefix_reuse.source == "live"
    assert backend.last_prefix_reuse.reused_tokens == len(prompt) + len(reply.token_ids) - 1
    reference.reset()
    fresh = reference.prefill(following, with_mtp=with_mtp)
    assert greedy_token(logits) == greedy_token(fresh)
    assert float(np.max(np.abs(logits - fresh))) < 1e-2
    if with_mtp:
        last = greedy_token(fresh)
        drafts, rows = draft_rows(backend, last, 3)
        fresh_drafts, fresh_rows = draft_rows(reference, last, 3)
        assert drafts == fresh_drafts
        assert float(np.max(np.abs(rows - fresh_rows))) < 1e-2


@pytest.mark.parametrize("depth", [0, 2], ids=["plain", "MTP depth 2"])
def test_regenerate_computes_one_token_and_gives_the_same_reply(
    backend: LlamaCppBackend, reference: LlamaCppBackend, depth: int
) -> None:
    backend.reset()
    messages = [ChatMessage("user", _text(50, 3))]
    _ask(backend, messages, depth)
    again = _same_as_fresh(backend, reference, messages, depth)
    assert again.stats.prompt_computed_tokens == 1
    assert backend.last_prefix_reuse.source == "checkpoint"


@pytest.mark.parametrize("depth", [0, 3], ids=["plain", "MTP depth 3"])
def test_an_edit_in_the_middle_resumes_before_it_and_replies_as_a_fresh_run(
    backend: LlamaCppBackend, reference: LlamaCppBackend, depth: int
) -> None:
    backend.reset()
    history = [
        ChatMessage("user", _text(30)),
        ChatMessage("assistant", _text(20, 5)),
        ChatMessage("user", _text(25, 2)),
    ]
    original = _ask(backend, history, depth)
    history += [ChatMessage("assistant", original.text), ChatMessage("user", _text(8, 1))]
    _ask(backend, history, depth)  # turn 2 keeps a checkpoint where turn 1 ended

    edited = [*history[:2], ChatMessage("user", _text(25, 7))]  # the third message changed
    reply = _same_as_fresh(backend, reference, edited, depth)
    # It resumed at a checkpoint at or before the edit, not from the start.
    assert 0 < reply.stats.prompt_reused_tokens < reply.prompt_token_count


def test_a_conversation_switched_away_from_and_back_to_comes_back_whole(
    backend: LlamaCppBackend, reference: LlamaCppBackend
) -> None:
    backend.reset()
    first = [ChatMessage("user", _text(80))]
    second = [ChatMessage("system", "Answer briefly."), ChatMessage("user", _text(80, 4))]
    reply_a = _ask(backend, first, 2)
    _ask(backend, second, 2)
    first += [ChatMessage("assistant", reply_a.text), ChatMessage("user", _text(6, 2))]
    kept = backend.kept_state_bytes
    back = _same_as_fresh(backend, reference, first, 2)
    assert backend.last_prefix_reuse.source == "saved"
    # All of the first conversation's prompt came back (its reply tokenises differently when
    # rendered again, see above), though the second one had taken the model in between.
    assert back.stats.prompt_reused_tokens >= reply_a.prompt_token_count - 1
    assert kept > 0


@pytest.mark.parametrize("depth", [0, 2], ids=["plain", "MTP depth 2"])
def test_an_edit_deep_in_a_long_prompt_resumes_from_a_checkpoint_inside_it(
    long_backend: LlamaCppBackend, reference: LlamaCppBackend, depth: int
) -> None:
    long_backend.reset()
    long_text = _text(400)
    original = [ChatMessage("user", long_text + " first ending")]
    _ask(long_backend, original, depth)
    edited = [ChatMessage("user", long_text + " another ending entirely")]
    reply = _same_as_fresh(long_backend, reference, edited, depth)
    assert reply.prompt_token_count > CHECKPOINT_INTERVAL + 100
    # The prompts differ only at the end, past the checkpoint taken every 1,024 tokens (the
    # one kept before the last token of the first prompt is past the edit): it resumed there.
    assert reply.stats.prompt_reused_tokens == CHECKPOINT_INTERVAL


def test_plain_and_mtp_requests_alternate_on_one_conversation(backend: LlamaCppBackend) -> None:
    backend.reset()
    messages = [ChatMessage("user", _text(35, 6))]
    plain = _ask(backend, messages, 0)
    speculative = _ask(backend, messages, 3)
    assert speculative.token_ids == plain.token_ids
    messages += [ChatMessage("assistant", plain.text), ChatMessage("user", _text(7))]
    plain = _ask(backend, messages, 0)
    speculative = _ask(backend, messages, 3)
    assert speculative.token_ids == plain.token_ids
    assert speculative.stats.prompt_reused_tokens > 0 and plain.stats.prompt_reused_tokens > 0


def test_reused_logits_match_a_fresh_prefill(backend: LlamaCppBackend) -> None:
    """The state a resume leaves gives the logits a fresh prefill gives (llama.cpp's CPU kernels
    round differently for different batch shapes, so the bound is that of the rollback test),
    and a resume one token off would differ far beyond that bound."""
    prompt = backend.tokenize(_text(60), parse_special=False)
    longer = prompt + backend.tokenize(" " + _text(12, 3), parse_special=False)
    backend.reset()
    backend.prefill(prompt, with_mtp=True)
    reused = backend.prefill(longer, with_mtp=True)  # prefill's row is the caller's own
    assert backend.last_prefix_reuse.reused_tokens == len(prompt)
    backend.reset()
    fresh = backend.prefill(longer, with_mtp=True)
    difference = float(np.max(np.abs(reused - fresh)))
    print(f"prefix reuse: max |Δlogit| vs a fresh prefill = {difference:.3g}")
    assert greedy_token(reused) == greedy_token(fresh)
    assert difference < 1e-2
    backend.reset()
    wrong = backend.prefill([*longer[:-2], longer[-1]], with_mtp=True)
    assert float(np.max(np.abs(reused - wrong))) > 100 * max(difference, 1e-5)


def test_with_no_memory_for_kept_states_turns_still_continue_and_nothing_is_kept(
    tiny_models: dict[str, Path], reference: LlamaCppBackend
) -> None:
    backend = LlamaCppBackend(
        tiny_models["mtp"], LoadSettings(threads=1, context_length=1024, state_cache_mib=0)
    )
    try:
        prompt = backend.tokenize(_text(30), parse_special=False)
        longer = prompt + backend.tokenize(" " + _text(6, 2), parse_special=False)
        backend.prefill(prompt, with_mtp=True)
        backend.prefill(longer, with_mtp=True)
        assert backend.last_prefix_reuse == PrefixReuse(
            len(prompt), len(longer) - len(prompt), "live"
        )
        assert backend.kept_state_bytes == 0
        # Regenerate has no checkpoint to go back to: the prompt is computed again, correctly.
        again = backend.prefill(longer, with_mtp=True)
        assert backend.last_prefix_reuse == PrefixReuse(0, len(longer), "")
        reference.reset()
        fresh = reference.prefill(longer, with_mtp=True)
        assert greedy_token(again) == greedy_token(fresh)
    finally:
        backend.close()


def test_the_adaptive_depth_puts_off_a_check_that_would_recompute_the_conversation(
    backend: LlamaCppBackend,
) -> None:
    """Plain and drafting requests keep their states apart; an adaptive depth that planned a
    plain check request (drafting wins) runs a long conversation's next turn drafting, where its
    state is, and checks on a later request that has nothing to lose."""
    policies = DepthPolicies(remember=False)
    policy = policies.for_request(4, adaptive=True)
    assert isinstance(policy, AdaptiveDepth)
    assert policy.restore(
        {
            "trials": [0.0, 50.0, 50.0, 0.0, 0.0],
            "kept": [0.0, 45.0, 40.0, 0.0, 0.0],
            "timed": {"0": [1e-3], "1": [1.1e-3], "2": [1.2e-3]},
            "plain_timed": [1e-3],
        }
    )
    policy._since_check = 1e9  # a check is due: reaching in only to set that up

    def adaptive(messages: list[ChatMessage]) -> GenerationResult:
        request = GenerationRequest(
            messages=tuple(messages), max_tokens=16, mtp_depth=4, adaptive_depth=True
        )
        return generate(
            backend,
            request,
            emit=lambda _chunk: None,
            cancelled=lambda: False,
            depth_policies=policies,
        )

    backend.reset()
    messages = [ChatMessage("user", _text(120))]
    reply = _ask(backend, messages, 2)  # the conversation so far, on the drafting side
    messages += [ChatMessage("assistant", reply.text), ChatMessage("user", _text(5, 3))]
    turn = adaptive(messages)
    assert any(turn.stats.drafted_by_depth), "it ran drafting, where the state is"
    assert turn.stats.prompt_reused_tokens > LANE_SWITCH_TOKENS
    assert turn.token_ids == _ask(backend, messages, 0).token_ids[: len(turn.token_ids)]

    unrelated = adaptive([ChatMessage("user", "Something else entirely.")])
    assert not any(unrelated.stats.drafted_by_depth), "the check ran on the next fresh prompt"
