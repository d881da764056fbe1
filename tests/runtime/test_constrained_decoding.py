"""Constrained decoding on real llama.cpp: a JSON schema or a forced tool call holds every token,
drafts included, and MTP stays exact under the constraint.

The tiny hybrid qwen35 model writes random bytes when left alone, so any reply that parses and
validates below does so because of the grammar.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

import jsonschema
import llguidance
import pytest

from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.chat_format.constraint import (
    closed_objects,
    json_schema_constraint,
    lark_constraint,
)
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.chat_format.tool_call_events import parse_reply
from app.engine.runtime.chat_format.tools import ToolChoice, ToolSpec
from app.engine.runtime.core.backend import DraftChooser, DraftResult
from app.engine.runtime.core.request import GenerationRequest, GenerationResult
from app.engine.runtime.sampling.sampler import SamplerSettings
from app.engine.runtime.speculative.generation import generate
from tests.runtime.chi_square import chi_square_critical

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
    },
    "required": ["name", "age", "tags"],
    "additionalProperties": False,
}
WEATHER = ToolSpec(
    "get_weather",
    "The weather in a city",
    json.dumps(
        {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 20},
                "days": {"type": "integer", "minimum": 1, "maximum": 14},
            },
            "required": ["city", "days"],
            "additionalProperties": False,
        }
    ),
)


def _run(
    backend: LlamaCppBackend, depth: int, temperature: float = 0.0, seed: int = 7, **fields: object
) -> GenerationResult:
    request = GenerationRequest(
        messages=(ChatMessage("user", "Describe a person as JSON."),),
        max_tokens=120,
        mtp_depth=depth,
        sampler=SamplerSettings(temperature=temperature, seed=seed),
        **fields,  # type: ignore[arg-type]
    )
    return generate(backend, request, emit=lambda _chunk: None, cancelled=lambda: False)


def test_json_schema_reply_validates_and_greedy_mtp_matches_plain(
    backend: LlamaCppBackend,
) -> None:
    constraint = json_schema_constraint(SCHEMA, "the response format")
    plain = _run(backend, 0, constraint=constraint)
    jsonschema.validate(json.loads(plain.text), SCHEMA)
    assert plain.finish_reason == "stop"
    for depth in (1, 2, 3):
        drafted = _run(backend, depth, constraint=constraint)
        assert drafted.token_ids == plain.token_ids, f"depth {depth}"
        assert sum(drafted.stats.drafted_by_depth) > 0
        assert sum(drafted.stats.accepted_by_depth) > 0


def test_sampled_drafts_are_never_tokens_the_grammar_forbids(
    backend: LlamaCppBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every cycle's drafts are checked against an independent matcher that has consumed the
    tokens committed so far (the prompt's reply up to the cycle)."""
    constraint = json_schema_constraint(SCHEMA, "the response format")
    checker = llguidance.LLMatcher(backend.grammar_tokenizer(), constraint.grammar, log_level=0)
    committed: list[int] = []
    cycles: list[tuple[int, int]] = []  # (drafted, allowed) per cycle
    real_draft = backend.draft

    def checked_draft(last_token: int, depth: int, choose: DraftChooser) -> DraftResult:
        result = real_draft(last_token, depth, choose)
        cycles.append((len(result.tokens), checker.validate_tokens(list(result.tokens))))
        return result

    def remember(chunk_tokens: Sequence[int]) -> None:
        committed.extend(chunk_tokens)
        assert checker.consume_tokens(list(chunk_tokens))

    monkeypatch.setattr(backend, "draft", checked_draft)
    for seed in range(4):
        checker.reset()
        result = generate(
            backend,
            GenerationRequest(
                prompt="{",
                max_tokens=160,
                mtp_depth=3,
                sampler=SamplerSettings(temperature=1.0, seed=seed),
                constraint=constraint,
            ),
            emit=lambda chunk: remember(chunk.token_ids),
            cancelled=lambda: False,
        )
        if result.finish_reason == "stop":
            jsonschema.validate(json.loads(result.text), SCHEMA)
    assert sum(drafted for drafted, _ in cycles) > 20
    assert all(allowed == drafted for drafted, allowed in cycles)


def test_forced_tool_call_has_arguments_matching_the_schema(backend: LlamaCppBackend) -> None:
    for depth in (0, 2):
        result = _run(
            backend,
            depth,
            temperature=0.8,
            tools=(WEATHER,),
            tool_choice=ToolChoice("function", "get_weather"),
        )
        reply = parse_reply(result.text)
        assert [call.name for call in reply.tool_calls] == ["get_weather"], result.text
        arguments = json.loads(reply.tool_calls[0].arguments)
        jsonschema.validate(arguments, json.loads(WEATHER.parameters))


def _sampled(backend: LlamaCppBackend, depth: int, runs: int) -> tuple[list[tuple[int, ...]], int]:
    """Tokens of seeded runs held to a grammar of a few letters, and the drafts accepted."""
    letters = lark_constraint("start: /[a-z ]{4,12}/", "a few letters")
    samples, accepted = [], 0
    for seed in range(runs):
        result = generate(
            backend,
            GenerationRequest(
                prompt="The sea",
                max_tokens=3,
                mtp_depth=depth,
                sampler=SamplerSettings(temperature=1.0, seed=seed),
                constraint=letters,
            ),
            emit=lambda _chunk: None,
            cancelled=lambda: False,
        )
        samples.append(result.token_ids)
        accepted += sum(result.stats.accepted_by_depth)
    return samples, accepted


@pytest.mark.slow
def test_sampled_constrained_mtp_follows_constrained_plain_decoding(
    backend: LlamaCppBackend,
) -> None:
    """The second and third tokens of many seeded runs: MTP under the grammar (drafts masked,
    Leviathan–Chen between the masked distributions) against plain decoding under it."""
    plain, _ = _sampled(backend, 0, 1500)
    drafted, accepted = _sampled(backend, 2, 1500)
    assert accepted > 300
    for position in (1, 2):
        first = Counter(tokens[position] for tokens in plain)
        second = Counter(tokens[position] for tokens in drafted)
        kept = [key for key in first.keys() | second.keys() if first[key] + second[key] >= 10]
        statistic = sum((first[k] - second[k]) ** 2 / (first[k] + second[k]) for k in kept)
        assert len(kept) >= 4
        assert statistic < chi_square_critical(len(kept) - 1, 1e-4), (position, statistic)


def test_objects_without_a_word_on_other_keys_are_closed_unless_combined() -> None:
    schema = {
        "type": "object",
        "properties": {"inner": {"type": "object", "properties": {"a": {"type": "integer"}}}},
        "$defs": {"Open": {"properties": {"b": {}}, "additionalProperties": True}},
        "allOf": [{"properties": {"c": {}}}],
    }
    closed = closed_objects(schema)
    assert "additionalProperties" not in closed  # combined with allOf: left open
    assert closed["properties"]["inner"]["additionalProperties"] is False
    assert closed["$defs"]["Open"]["additionalProperties"] is True
    assert closed["allOf"] == schema["allOf"]
