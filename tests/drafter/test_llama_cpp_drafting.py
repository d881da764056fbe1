"""The llama.cpp backend drafts with a separate Gemma 4 drafter, exactly.

Each tiny pair's target is opened as a user opens it (``LlamaCppBackend`` on the target GGUF, no
drafter named): the backend finds the drafter beside it (centroid kind: ``mtp-*.gguf`` in the
same folder; dense kind: ``MTP/``), binds the drafter's context to the target's (``ctx_other``)
and drafts through the same loop as the built-in MTP heads. The contract is the project's
(docs/architecture.md#the-exactness-contract): greedy output equals plain decoding token for
token at every depth, also under the adaptive depth and a grammar; at temperature > 0 the
tokens follow plain decoding's distribution (two-sample chi-square); the drafts themselves are
what transformers drafts (the reference the pair was made with), and the drafter's input after
cycles of accepts and rejects is the one a fresh prefill gives.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Sequence

import jsonschema
import llguidance
import numpy as np
import pytest

from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.chat_format.constraint import json_schema_constraint
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.backend import DraftChooser, DraftResult, LoadSettings
from app.engine.runtime.core.request import GenerationRequest, GenerationResult
from app.engine.runtime.core.stats import StatsRecorder
from app.engine.runtime.sampling.acceptance import AcceptMode
from app.engine.runtime.sampling.sampler import SamplerSettings, greedy_token
from app.engine.runtime.speculative.cycle import SpeculativeDecoder
from app.engine.runtime.speculative.depth_policy import DepthPolicies
from app.engine.runtime.speculative.generation import generate
from tests.drafter.pairs import PAIRS, Pair
from tests.runtime.chi_square import chi_square_critical
from tests.runtime.draft_rows import draft_rows

QUESTIONS = (
    "How do I sort a list of dictionaries by a key?",
    "What does the json module do?",
    "How do I read a file line by line?",
    "Explain what a context manager is.",
)
Q8_TOLERANCE = 0.15
"""Max |Δlogit| against transformers' BF16 reference (see tests/drafter/test_llama_cpp_draft.py)."""
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "size": {"type": "integer", "minimum": 0, "maximum": 99},
    },
    "required": ["name", "size"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module", params=list(PAIRS.values()), ids=list(PAIRS))
def paired(request: pytest.FixtureRequest) -> Iterator[tuple[Pair, LlamaCppBackend]]:
    pair = request.param
    backend = LlamaCppBackend(pair.target, LoadSettings(threads=1, context_length=1024))
    yield pair, backend
    backend.close()


def _ask(
    backend: LlamaCppBackend,
    question: str,
    depth: int,
    *,
    adaptive: bool = False,
    policies: DepthPolicies | None = None,
    **fields: object,
) -> GenerationResult:
    request = GenerationRequest(
        messages=(ChatMessage("user", question),),
        max_tokens=48,
        mtp_depth=depth,
        adaptive_depth=adaptive,
        **fields,  # type: ignore[arg-type]
    )
    return generate(
        backend, request, emit=lambda _c: None, cancelled=lambda: False, depth_policies=policies
    )


def test_the_target_drafts_with_the_drafter_found_beside_it(
    paired: tuple[Pair, LlamaCppBackend],
) -> None:
    pair, backend = paired
    assert backend.info.drafter == pair.drafter
    assert backend.info.mtp_available and backend.info.mtp_unavailable_reason is None
    assert backend.info.mtp_layers == 4
    assert backend.info.max_draft_depth == LoadSettings().max_draft_depth


def test_the_backend_drafts_what_transformers_drafts(
    paired: tuple[Pair, LlamaCppBackend],
) -> None:
    """Prefill, then three draft steps fed transformers' own choices: every q row is the
    reference's dense-head row within what Q8_0 weights move it (positions, hidden rows and
    the drafter's carried state all line up)."""
    pair, backend = paired
    reference = np.load(pair.reference)
    worst = 0.0
    for index in range(3):
        backend.reset()
        logits = backend.prefill(reference[f"prompt_{index}"].tolist(), with_mtp=True)
        first = int(reference[f"first_{index}"])
        assert greedy_token(logits) == first
        wanted = reference[f"drafted_{index}"].tolist()
        drafted, rows = draft_rows(backend, first, len(wanted), lambda step, _r, w=wanted: w[step])
        assert drafted == tuple(wanted)
        worst = max(worst, float(np.abs(rows - reference[f"dense_logits_{index}"]).max()))
    print(f"{pair.kind}: backend drafts vs transformers max |Δlogit| {worst:.3f}")
    assert worst < Q8_TOLERANCE


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
@pytest.mark.slow
def test_greedy_drafting_output_is_plain_decoding(
    paired: tuple[Pair, LlamaCppBackend], depth: int
) -> None:
    _pair, backend = paired
    rejected = partial = full = 0
    for question in QUESTIONS:
        plain = _ask(backend, question, 0)
        drafted = _ask(backend, question, depth)
        assert drafted.token_ids == plain.token_ids, question
        stats = drafted.stats
        assert stats.mode == "lc" and stats.cycles > 0
        rejected += stats.cycles - stats.accepted_by_depth[0]
        partial += stats.accepted_by_depth[0] - stats.accepted_by_depth[-1]
        full += stats.accepted_by_depth[-1]
    assert rejected > 0 and full > 0  # every way through the rollback was taken
    if depth > 1:
        assert partial > 0


def test_greedy_output_under_the_adaptive_depth_is_plain_decoding(
    paired: tuple[Pair, LlamaCppBackend],
) -> None:
    _pair, backend = paired
    policies = DepthPolicies(remember=False)
    deepest = 0
    for question in QUESTIONS * 2:
        plain = _ask(backend, question, 0)
        adaptive = _ask(backend, question, 4, adaptive=True, policies=policies)
        assert adaptive.token_ids == plain.token_ids
        deepest = max(deepest, sum(1 for drafted in adaptive.stats.drafted_by_depth if drafted))
    assert deepest >= 2  # the policy drafted, and more than one token at a time


def test_the_drafters_input_after_cycles_is_a_fresh_prefills(
    paired: tuple[Pair, LlamaCppBackend],
) -> None:
    """Greedy output never shows a wrong drafter input (it only lowers acceptance): after
    sampled cycles of accepts and rejects the draft logits equal a fresh prefill's — and
    pairing the drafter with the previous position's hidden row (an off-by-one) does not."""
    _pair, backend = paired
    prompt = backend.tokenize("How do I open a file in Python?", parse_special=False)
    recorder = StatsRecorder(mode="lc", depth=3)
    sampler = SamplerSettings(temperature=0.9, seed=4)
    decoder = SpeculativeDecoder(
        backend, sampler, AcceptMode.LEVIATHAN_CHEN, np.random.default_rng(4), recorder
    )
    backend.reset()
    committed = [greedy_token(backend.prefill(prompt, with_mtp=True))]
    accepted = []
    for depth in [3, 0, 2, 3, 0, 0, 1, 3, 3, 2]:
        cycle = decoder.cycle(committed[-1], depth)
        committed.extend(cycle.tokens)
        accepted.append(cycle.accepted)
    assert {0} < set(accepted)  # cycles kept some drafts and rejected others

    def draft_logits() -> np.ndarray:
        return draft_rows(backend, committed[-1], 3)[1]

    after_cycles = draft_logits()
    backend.reset()
    backend.prefill(prompt + committed[:-1], with_mtp=True)
    difference = float(np.abs(after_cycles - draft_logits()).max())
    # The control reaches into the backend only to build that wrong input.
    backend.reset()
    backend.prefill(prompt + committed[:-2], with_mtp=True)
    previous_row = backend._decoder.lane.hidden_last.copy()
    backend.reset()
    backend.prefill(prompt + committed[:-1], with_mtp=True)
    backend._decoder.lane.hidden_last = previous_row
    wrong = float(np.abs(after_cycles - draft_logits()).max())
    print(f"drafter input after cycles: {difference:.3g} (the previous row gives {wrong:.3g})")
    assert difference < 1e-2
    assert wrong > 100 * max(difference, 1e-5)


def _sampled_tokens(
    backend: LlamaCppBackend, depth: int, runs: int
) -> tuple[list[tuple[int, ...]], int]:
    """The first three tokens of seeded runs after "The" (a broad distribution for these
    models; -1 where the reply ended before) and the drafts they accepted."""
    samples, accepted = [], 0
    for seed in range(runs):
        request = GenerationRequest(
            prompt="The",
            max_tokens=3,
            mtp_depth=depth,
            sampler=SamplerSettings(temperature=1.0, top_k=8, seed=seed),
        )
        result = generate(backend, request, emit=lambda _c: None, cancelled=lambda: False)
        samples.append((*result.token_ids, -1, -1, -1)[:3])
        accepted += sum(result.stats.accepted_by_depth)
    return samples, accepted


@pytest.mark.slow
def test_sampled_drafting_follows_plain_decoding(paired: tuple[Pair, LlamaCppBackend]) -> None:
    """Tokens 2 and 3 of 2,000 seeded runs, plain against depth 3 (Leviathan–Chen with q from
    the drafter's logits through the one sampler): a two-sample chi-square below its 10⁻⁴
    critical value."""
    _pair, backend = paired
    plain, _ = _sampled_tokens(backend, 0, 2000)
    drafted, accepted = _sampled_tokens(backend, 3, 2000)
    assert accepted > 500  # the Leviathan–Chen path decided many tokens
    for position in (1, 2):
        first = Counter(tokens[position] for tokens in plain)
        second = Counter(tokens[position] for tokens in drafted)
        kept = [key for key in first.keys() | second.keys() if first[key] + second[key] >= 10]
        statistic = sum((first[k] - second[k]) ** 2 / (first[k] + second[k]) for k in kept)
        assert len(kept) >= 4
        assert statistic < chi_square_critical(len(kept) - 1, 1e-4), (position, statistic)


def test_under_a_grammar_drafts_are_held_to_it_and_greedy_output_is_plain(
    paired: tuple[Pair, LlamaCppBackend], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A JSON schema holds every token of the reply and every draft (checked by an independent
    matcher fed the committed tokens), and greedy drafting still equals plain decoding."""
    _pair, backend = paired
    constraint = json_schema_constraint(SCHEMA, "the response format")
    question = "Describe a module as JSON."
    plain = _ask(backend, question, 0, constraint=constraint)
    jsonschema.validate(json.loads(plain.text), SCHEMA)
    checker = llguidance.LLMatcher(backend.grammar_tokenizer(), constraint.grammar, log_level=0)
    cycles: list[tuple[int, int]] = []
    real_draft = backend.draft

    def checked(last_token: int, depth: int, choose: DraftChooser) -> DraftResult:
        result = real_draft(last_token, depth, choose)
        cycles.append((len(result.tokens), checker.validate_tokens(list(result.tokens))))
        return result

    def consume(tokens: Sequence[int]) -> None:
        assert checker.consume_tokens(list(tokens))

    monkeypatch.setattr(backend, "draft", checked)
    for depth in (1, 3):
        checker.reset()
        request = GenerationRequest(
            messages=(ChatMessage("user", question),),
            max_tokens=48,
            mtp_depth=depth,
            constraint=constraint,
        )
        drafted = generate(
            backend, request, emit=lambda chunk: consume(chunk.token_ids), cancelled=lambda: False
        )
        assert drafted.token_ids == plain.token_ids, depth
    assert sum(count for count, _ in cycles) > 10
    assert all(allowed == count for count, allowed in cycles)
