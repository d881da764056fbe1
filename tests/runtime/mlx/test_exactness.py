"""The decoding contract on the MLX backend: on the converted demo + sidecar (what a user runs),
and on the demo's BF16 folder for the state checks.

The contract: docs/architecture.md#the-exactness-contract.

Greedy MTP output must be token-for-token plain decoding at every depth, through cycles where
the head is partly wrong; after such a cycle the trunk (gated-delta-net state restored and
replayed, KV trimmed) and the head's cache must be where a fresh prefill of the same tokens
puts them.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.engine.runtime.backends.mlx.backend import MlxBackend
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.request import GenerationRequest, GenerationResult
from app.engine.runtime.core.stats import StatsRecorder
from app.engine.runtime.sampling.acceptance import AcceptMode
from app.engine.runtime.sampling.sampler import SamplerSettings, greedy_token
from app.engine.runtime.speculative.cycle import SpeculativeDecoder
from app.engine.runtime.speculative.depth_policy import DepthPolicies
from app.engine.runtime.speculative.generation import generate, prompt_tokens
from tests.runtime.draft_rows import draft_rows

PROMPTS = (
    "Write a Python function that returns the largest of three numbers.",
    "Tell me a short story about a lighthouse keeper.",
    "Explain what a hash table is.",
)
GREEDY = SamplerSettings(temperature=0.0)
TOKENS = 12


def _run(backend: MlxBackend, prompt: str, depth: int, tokens: int = TOKENS) -> GenerationResult:
    request = GenerationRequest(
        messages=(ChatMessage("user", prompt),), max_tokens=tokens, sampler=GREEDY, mtp_depth=depth
    )
    return generate(backend, request, emit=lambda _chunk: None, cancelled=lambda: False)


@pytest.mark.slow
def test_greedy_mtp_equals_plain_decoding_at_every_depth_on_the_4bit_model(
    four_bit: MlxBackend,
) -> None:
    partial_cycles = 0
    for prompt in PROMPTS:
        plain = _run(four_bit, prompt, 0)
        for depth in (1, 2, 3, 4):
            mtp = _run(four_bit, prompt, depth)
            assert mtp.token_ids == plain.token_ids, (prompt, depth)
            assert mtp.text == plain.text
            drafted, accepted = mtp.stats.drafted_by_depth, mtp.stats.accepted_by_depth
            assert accepted[0] > 0, "the head should be right sometimes"
            partial_cycles += sum(d - a for d, a in zip(drafted, accepted, strict=True))
    assert partial_cycles > 10, "the runs must include rejected drafts"


@pytest.mark.slow
def test_greedy_mtp_equals_plain_decoding_on_the_8bit_model(eight_bit: MlxBackend) -> None:
    plain = _run(eight_bit, PROMPTS[0], 0)
    for depth in (2, 4):
        assert _run(eight_bit, PROMPTS[0], depth).token_ids == plain.token_ids
    adaptive = GenerationRequest(
        messages=(ChatMessage("user", PROMPTS[0]),),
        max_tokens=TOKENS,
        sampler=GREEDY,
        mtp_depth=4,
        adaptive_depth=True,
    )
    # depth-0 cycles (which only bring the head's cache up to date) mix with drafting ones
    result = generate(eight_bit, adaptive, emit=lambda _c: None, cancelled=lambda: False)
    assert result.token_ids == plain.token_ids


def test_after_a_partial_accept_the_state_equals_a_fresh_prefill(bf16: MlxBackend) -> None:
    request = GenerationRequest(messages=(ChatMessage("user", PROMPTS[1]),), sampler=GREEDY)
    prompt = prompt_tokens(bf16, request)
    bf16.reset()
    last = greedy_token(bf16.prefill(prompt, with_mtp=True))
    committed = list(prompt)
    recorder = StatsRecorder(mode="lc", depth=3)
    decoder = SpeculativeDecoder(
        bf16, GREEDY, AcceptMode.LEVIATHAN_CHEN, np.random.default_rng(0), recorder
    )
    for _ in range(30):
        cycle = decoder.cycle(last, 3)
        committed += [last, *cycle.tokens[:-1]]
        last = cycle.tokens[-1]
        if 0 < cycle.accepted < 3:
            break
    else:
        pytest.fail("no cycle accepted part of its drafts")
    assert bf16.committed_length == len(committed)

    after_cycles_head = draft_rows(bf16, last, 1)[1][0]
    after_cycles = bf16.verify([last]).logits[0]
    bf16.rollback(bf16.committed_length)

    bf16.reset()
    fresh = bf16.prefill([*committed, last], with_mtp=True)
    bf16.reset()
    bf16.prefill(committed, with_mtp=True)
    fresh_head = draft_rows(bf16, last, 1)[1][0]

    trunk_diff = float(np.max(np.abs(after_cycles - fresh)))
    head_diff = float(np.max(np.abs(after_cycles_head - fresh_head)))
    print(f"max abs diff after a partial accept: trunk {trunk_diff:.3g}, head {head_diff:.3g}")
    assert np.argmax(after_cycles) == np.argmax(fresh)
    assert np.argmax(after_cycles_head) == np.argmax(fresh_head)
    # mlx on the CPU computes deterministically: the restored + replayed state is bit-exact
    assert trunk_diff == 0.0 and head_diff == 0.0


@pytest.mark.slow
def test_drafts_stopped_early_by_the_confidence_stop_keep_greedy_output_exact(
    bf16: MlxBackend,
) -> None:
    policies = DepthPolicies(remember=False)
    stops = 0
    for prompt in PROMPTS:

        def run(depth: int, prompt: str = prompt) -> GenerationResult:
            request = GenerationRequest(
                messages=(ChatMessage("user", prompt),),
                max_tokens=24,
                sampler=GREEDY,
                mtp_depth=depth,
                stop_unsure_drafts=True,
            )
            return generate(
                bf16,
                request,
                emit=lambda _chunk: None,
                cancelled=lambda: False,
                depth_policies=policies,
            )

        plain, speculative = run(0), run(4)
        assert speculative.token_ids == plain.token_ids, prompt
        stops += speculative.stats.confidence_stops
    assert stops > 0, "the demo head is unsure often enough to stop some drafts"
