"""Decode speed with log-probabilities on and off, measured side by side.

Runs the same chat prompts, seeds and sampler on one in-process llama.cpp backend, alternating
requests without log-probabilities, with each token's (``logprobs=0``) and with 20 alternatives
(``logprobs=20``, the most a request may ask for), so machine noise lands on every way alike,
and prints the pooled decode tok/s of each way and its ratio to the one without. ``--wide F``
runs on the memory-bound stand-in (every FFN widened F×, :mod:`app.engine.runtime.bench.
wide_model`); ``--vocab V`` pads the vocabulary so each row is V wide (log-softmax cost grows
with it).

    python bench/bench_logprobs.py [--model PATH] [--depth 3] [--wide 24] [--vocab 151936]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.bench.wide_model import widened_copy
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.demo_model import demo_model_path
from app.engine.runtime.core.request import GenerationRequest
from app.engine.runtime.core.stats import combined_stats
from app.engine.runtime.sampling.sampler import SamplerSettings
from app.engine.runtime.speculative.generation import generate

PROMPTS = (
    "Tell me a story about a dragon.",
    "Explain how a bicycle works.",
    "Write a poem about the sea.",
    "List five uses of a paper clip.",
)
WAYS = {"off": None, "logprobs": 0, "top 20": 20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None, help="a GGUF (default: the demo)")
    parser.add_argument("--depth", type=int, default=3, help="MTP depth (0 = plain)")
    parser.add_argument("--temperature", type=float, default=0.6)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=2, help="passes over the prompts")
    parser.add_argument("--wide", type=int, default=1, metavar="F", help="FFN widening factor")
    parser.add_argument("--vocab", type=int, default=0, metavar="V", help="padded vocabulary")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    model = args.model or demo_model_path()
    if args.wide > 1 or args.vocab:
        model = widened_copy(model, args.wide, vocab=args.vocab)
    backend = LlamaCppBackend(model, LoadSettings(threads=1, context_length=2048))
    stats: dict[str, list] = {way: [] for way in WAYS}
    try:
        for repeat in range(args.repeats):
            for index, prompt in enumerate(PROMPTS):
                for way, logprobs in WAYS.items():
                    request = GenerationRequest(
                        messages=(ChatMessage("user", prompt),),
                        max_tokens=args.max_tokens,
                        mtp_depth=args.depth,
                        sampler=SamplerSettings(
                            temperature=args.temperature, seed=repeat * 100 + index
                        ),
                        logprobs=logprobs,
                    )
                    result = generate(
                        backend, request, emit=lambda _c: None, cancelled=lambda: False
                    )
                    stats[way].append(result.stats)
    finally:
        backend.close()
    rates = {way: combined_stats(runs).decode_tokens_per_second for way, runs in stats.items()}
    figures = {
        "model": model.name,
        "depth": args.depth,
        "tokens_per_second": rates,
        "ratio_to_off": {way: rate / rates["off"] for way, rate in rates.items()},
    }
    if args.json:
        print(json.dumps(figures))
        return
    print(
        f"{model.name} · depth {args.depth} · T {args.temperature} (shared machine, side by side)"
    )
    for way, rate in rates.items():
        print(f"  {way:>8}: {rate:7.1f} tok/s  ({rate / rates['off']:.3f}× off)")


if __name__ == "__main__":
    main()
