"""Acceptance and decode speed with and without a JSON schema, measured side by side.

Runs the same chat prompts, seeds and sampler on one in-process llama.cpp backend, interleaving
four ways — plain and MTP drafting, each free and held to a JSON schema — so machine noise lands
on all of them alike, and prints the pooled figures per way. The grammar's cost is measured too:
the committed tokens of the constrained replies are replayed through a fresh grammar state and
each mask computation is timed.

    python bench/bench_structured_output.py [--model PATH] [--depth 3] [--temperature 0.6]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.chat_format.constraint import (
    GrammarState,
    OutputConstraint,
    json_schema_constraint,
)
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.demo_model import demo_model_path
from app.engine.runtime.core.request import GenerationRequest, GenerationResult
from app.engine.runtime.core.stats import DecodeStats, combined_stats
from app.engine.runtime.sampling.sampler import SamplerSettings
from app.engine.runtime.speculative.generation import generate

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "language": {"enum": ["python", "c", "rust", "go"]},
        "years": {"type": "integer", "minimum": 0, "maximum": 60},
        "projects": {
            "type": "array",
            "maxItems": 4,
            "items": {
                "type": "object",
                "properties": {
                    "title": {"type": "string", "maxLength": 40},
                    "stars": {"type": "integer", "minimum": 0},
                },
                "required": ["title", "stars"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["name", "language", "years", "projects"],
    "additionalProperties": False,
}
PROMPTS = (
    "Describe a programmer and their projects.",
    "Write a function that sorts a list of files by size.",
    "Who maintains the parser module?",
    "Summarise the last release of the tool.",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None, help="GGUF (default: the demo)")
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--temperature", type=float, default=0.6)
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3, help="times through the prompts")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    path = args.model or demo_model_path()
    backend = LlamaCppBackend(path, LoadSettings(threads=args.threads, max_draft_depth=args.depth))
    constraint = json_schema_constraint(SCHEMA, "the benchmark schema")
    ways = {
        "plain, free": (0, None),
        "plain, JSON schema": (0, constraint),
        f"MTP depth {args.depth}, free": (args.depth, None),
        f"MTP depth {args.depth}, JSON schema": (args.depth, constraint),
    }
    results: dict[str, list[GenerationResult]] = {name: [] for name in ways}
    try:
        for round_index in range(args.rounds):
            for prompt_index, prompt in enumerate(PROMPTS):
                seed = round_index * len(PROMPTS) + prompt_index
                for name, (depth, way_constraint) in ways.items():
                    request = GenerationRequest(
                        messages=(ChatMessage("user", prompt),),
                        max_tokens=args.max_tokens,
                        sampler=SamplerSettings(temperature=args.temperature, seed=seed),
                        mtp_depth=depth,
                        constraint=way_constraint,
                    )
                    backend.reset()  # each request computes its prompt: no reuse across ways
                    results[name].append(
                        generate(backend, request, emit=lambda _c: None, cancelled=lambda: False)
                    )
        mask_us = _mask_microseconds(backend, constraint, results)
    finally:
        backend.close()

    print(f"model {path.name}, T {args.temperature}, {args.rounds * len(PROMPTS)} requests a way")
    print(f"{'way':<28} {'tokens':>7} {'accept':>7} {'tok/cycle':>9} {'decode tok/s':>12}")
    for name, runs in results.items():
        stats = combined_stats([run.stats for run in runs])
        per_cycle = f"{stats.tokens_per_cycle:.2f}" if stats.cycles else "-"
        print(
            f"{name:<28} {stats.generated_tokens:>7} {_acceptance(stats):>7} "
            f"{per_cycle:>9} {stats.decode_tokens_per_second:>12.1f}"
        )
    valid = sum(_parses(run) for name, runs in results.items() if "schema" in name for run in runs)
    print(f"grammar mask: {mask_us:.1f} µs per token; constrained replies that parse: {valid}")


def _acceptance(stats: DecodeStats) -> str:
    drafted = sum(stats.drafted_by_depth)
    return f"{sum(stats.accepted_by_depth) / drafted:.3f}" if drafted else "-"


def _parses(result: GenerationResult) -> bool:
    try:
        json.loads(result.text)
    except ValueError:
        return result.finish_reason != "stop"  # cut by max tokens: not a failure of the grammar
    return True


def _mask_microseconds(
    backend: LlamaCppBackend,
    constraint: OutputConstraint,
    results: dict[str, list[GenerationResult]],
) -> float:
    """Replay every constrained reply through a fresh grammar state, timing each mask."""
    seconds = masks = 0.0
    for name, runs in results.items():
        if "schema" not in name:
            continue
        for run in runs:
            state = GrammarState(constraint, backend.grammar_tokenizer(), backend.info.vocab_size)
            for token in run.token_ids:
                state.allowed()
                state.consume(token)
            seconds += state.mask_seconds
            masks += state.masks
    return seconds / masks * 1e6 if masks else 0.0


if __name__ == "__main__":
    main()
