"""Penalties, logit bias, min-p and top-k under speculative decoding, on real llama.cpp with the
demo model (docs/architecture.md#penalties-and-logit-bias).

The penalties depend on the tokens so far, so inside a cycle draft position i must count the
drafts before it, for the head's q_i and the target's p_i alike, and forget them on rejection:

- greedy MTP output with penalties is plain greedy output with them, token for token, through
  rejections and partial acceptances — and differs from the output without them;
- a token banned by ``logit_bias`` -100 never appears, where plain decoding writes it often;
- sampled MTP tokens follow what plain decoding samples under the same settings (two-sample
  chi-square, as tests/runtime/test_sampled_exactness.py), while a loop that forgets the
  cycle's earlier drafts fails the same bound — so the test sees the plumbing it is about.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import replace

import pytest

from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.demo_model import demo_model_path
from app.engine.runtime.core.request import GenerationRequest, GenerationResult
from app.engine.runtime.sampling.penalties import Penalties
from app.engine.runtime.sampling.sampler import SamplerSettings
from app.engine.runtime.speculative import generation
from app.engine.runtime.speculative.depth_policy import DepthPolicies
from app.engine.runtime.speculative.generation import generate
from tests.runtime.chi_square import chi_square_critical

PROMPTS = ("def add(a, b):\n", "for i in range(10):\n", "x = [1, 2, 3", "if x == 1:\n")
"""Replies long enough to repeat tokens; on the last, a loop that forgets the cycle's earlier
drafts writes another reply at depth 3."""
PENALISED = SamplerSettings(
    temperature=0.0,
    repetition_penalty=1.3,
    frequency_penalty=0.6,
    presence_penalty=0.4,
    logit_bias=((11, 1.5),),
)
SAMPLED = SamplerSettings(
    temperature=1.0,
    top_k=10,
    min_p=0.02,
    repetition_penalty=1.5,
    frequency_penalty=2.0,
    presence_penalty=1.0,
    logit_bias=((19, -100.0), (23, 1.0)),
)
"""Strong penalties, a ban of a token plain sampling writes often (19) and a bias."""
REPEATING = "0 0 0 0 0 0"
"""A prompt whose continuation repeats its own recent tokens, so a draft's penalty changes the
next position's distribution (with a loop that forgets the drafts, a fifth to two fifths of the
runs write other tokens at positions 2 and 3)."""
RUNS = 2000


@pytest.fixture(scope="module")
def demo() -> Iterator[LlamaCppBackend]:
    backend = LlamaCppBackend(demo_model_path(), LoadSettings(threads=1, context_length=1024))
    yield backend
    backend.close()


def _run(
    backend: LlamaCppBackend,
    prompt: str,
    sampler: SamplerSettings,
    depth: int,
    max_tokens: int = 64,
    policies: DepthPolicies | None = None,
) -> GenerationResult:
    request = GenerationRequest(
        prompt=prompt, max_tokens=max_tokens, mtp_depth=depth, sampler=sampler
    )
    return generate(
        backend, request, emit=lambda _c: None, cancelled=lambda: False, depth_policies=policies
    )


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.slow
def test_greedy_mtp_with_penalties_is_plain_greedy_with_them(
    demo: LlamaCppBackend, depth: int
) -> None:
    rejected = partial = changed = 0
    for prompt in PROMPTS:
        plain = _run(demo, prompt, PENALISED, 0)
        speculative = _run(demo, prompt, PENALISED, depth)
        assert speculative.token_ids == plain.token_ids, prompt
        changed += plain.token_ids != _run(demo, prompt, SamplerSettings(), 0).token_ids
        stats = speculative.stats
        rejected += stats.cycles - stats.accepted_by_depth[0]
        partial += stats.accepted_by_depth[0] - stats.accepted_by_depth[-1]
    assert changed == len(PROMPTS), "the penalties must change every greedy reply"
    assert rejected > 0
    if depth > 1:
        assert partial > 0


def test_a_banned_token_never_appears(demo: LlamaCppBackend) -> None:
    prompt = PROMPTS[2]
    plain = _run(demo, prompt, SamplerSettings(), 0, max_tokens=64)
    banned = Counter(plain.token_ids).most_common(1)[0][0]
    assert plain.token_ids.count(banned) >= 3  # it would be written often
    for temperature in (0.0, 1.0):
        for depth in (0, 3):
            for seed in range(3):
                sampler = SamplerSettings(
                    temperature=temperature, seed=seed, logit_bias=((banned, -100.0),)
                )
                reply = _run(demo, prompt, sampler, depth, max_tokens=64)
                assert banned not in reply.token_ids, (temperature, depth, seed)
                assert len(reply.token_ids) > 8


class _ForgettingDrafts(Penalties):
    """A deliberately wrong loop: the edits of a cycle's every position count only what was
    committed before the cycle, never the cycle's earlier drafts."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._pending: list[int] = []
        self._direct = True

    def push(self, token: int) -> None:
        if self._direct:
            super().push(token)
            self._direct = False
        else:
            self._pending.append(token)

    def pop(self, count: int) -> None:
        del self._pending[len(self._pending) - count :]
        self.push_all_now()

    def push_all_now(self) -> None:
        for token in self._pending:
            super().push(token)
        self._pending, self._direct = [], True


def _tokens(backend: LlamaCppBackend, depth: int) -> list[tuple[int, ...]]:
    policies = DepthPolicies(remember=False)
    return [
        _run(backend, REPEATING, replace(SAMPLED, seed=seed), depth, 4, policies).token_ids
        for seed in range(RUNS)
    ]


def _two_sample_chi_square(first: Counter, second: Counter) -> tuple[float, int]:
    categories = [key for key in first.keys() | second.keys() if first[key] + second[key] >= 10]
    statistic = sum((first[k] - second[k]) ** 2 / (first[k] + second[k]) for k in categories)
    return statistic, len(categories) - 1


def _worst(plain: list[tuple[int, ...]], other: list[tuple[int, ...]]) -> float:
    """The largest chi-square statistic over positions 1..3 (the first cycle's), as a multiple
    of its bound at a 10⁻⁴ false-alarm rate."""
    ratios = []
    for position in (1, 2, 3):
        statistic, dof = _two_sample_chi_square(
            Counter(tokens[position] for tokens in plain if len(tokens) > position),
            Counter(tokens[position] for tokens in other if len(tokens) > position),
        )
        assert dof >= 3
        ratios.append(statistic / chi_square_critical(dof, 1e-4))
    return max(ratios)


@pytest.mark.slow
def test_sampled_mtp_with_penalties_follows_plain_decoding(
    demo: LlamaCppBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = _tokens(demo, 0)
    assert all(19 not in tokens for tokens in plain)
    exact = _worst(plain, _tokens(demo, 3))
    monkeypatch.setattr(generation, "Penalties", _ForgettingDrafts)
    forgetting = _worst(plain, _tokens(demo, 3))
    print(f"chi-square / bound: MTP {exact:.2f}, MTP forgetting its drafts {forgetting:.2f}")
    assert exact < 1.0
    assert forgetting > 1.0, "the test must see drafts left uncounted"
