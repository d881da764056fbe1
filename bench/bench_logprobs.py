"""Decode speed with log-probabilities on and off, measured side by side.

Runs the same chat prompts, seeds and sampler on one in-process llama.cpp backend, alternating
requests without log-probabilities, with each token's (``logprobs=0``) and with 20 alternatives
(``logprobs=20``, the most a request may ask for), so machine noise lands on every way alike
(which way runs first on a prompt, and so prefills it, rotates). It prints the pooled decode
tok/s of each way and its ratio to the one without, and the CPU time per token of the decoding
thread (llama.cpp runs one thread, the caller's, so this is what the request itself cost, little
moved by other work on a shared machine). ``--wide F`` runs on the memory-bound stand-in (every
FFN widened F×, :mod:`app.engine.runtime.bench.wide_model`); ``--vocab V`` pads the vocabulary
so each row is V wide (the log-softmax's cost grows with it).

    python bench/bench_logprobs.py [--model PATH] [--depth 3] [--wide 24] [--vocab 151936]
"""

from __future__ import annotations

import argparse
import json
import time
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
    parser.add_argument("--repeats", type=int, default=3, help="passes over the prompts")
    parser.add_argument("--wide", type=int, default=1, metavar="F", help="FFN widening factor")
    parser.add_argument("--vocab", type=int, default=0, metavar="V", help="padded vocabulary")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    model = args.model or demo_model_path()
    if args.wide > 1 or args.vocab:
        model = widened_copy(model, args.wide, vocab=args.vocab)
    backend = LlamaCppBackend(model, LoadSettings(threads=1, context_length=2048))
    stats: dict[str, list] = {way: [] for way in WAYS}
    cpu_seconds = dict.fromkeys(WAYS, 0.0)
    try:
        for repeat in range(args.repeats):
            for index, prompt in enumerate(PROMPTS):
                ways = list(WAYS.items())
                turn = (repeat * len(PROMPTS) + index) % len(ways)  # each way goes first alike:
                for way, logprobs in ways[turn:] + ways[:turn]:  # the first one prefills
                    request = GenerationRequest(
                        messages=(ChatMessage("user", prompt),),
                        max_tokens=args.max_tokens,
                        mtp_depth=args.depth,
                        sampler=SamplerSettings(
                            temperature=args.temperature, seed=repeat * 100 + index
                        ),
                        logprobs=logprobs,
                    )
                    started = time.thread_time()
                    result = generate(
                        backend, request, emit=lambda _c: None, cancelled=lambda: False
                    )
                    cpu_seconds[way] += time.thread_time() - started
                    stats[way].append(result.stats)
    finally:
        backend.close()
    pooled = {way: combined_stats(runs) for way, runs in stats.items()}
    rates = {way: one.decode_tokens_per_second for way, one in pooled.items()}
    cpu_ms = {way: 1000 * cpu_seconds[way] / (one.generated_tokens) for way, one in pooled.items()}
    figures = {
        "model": model.name,
        "depth": args.depth,
        "tokens_per_second": rates,
        "ratio_to_off": {way: rate / rates["off"] for way, rate in rates.items()},
        "cpu_ms_per_token": cpu_ms,
    }
    if args.json:
        print(json.dumps(figures))
        return
    print(
        f"{model.name} · depth {args.depth} · T {args.temperature} (shared machine, side by side)"
    )
    for way, rate in rates.items():
        print(
            f"  {way:>8}: {rate:7.1f} tok/s  ({rate / rates['off']:.3f}× off) · "
            f"{cpu_ms[way]:.3f} ms CPU per token ({cpu_ms[way] / cpu_ms['off']:.3f}× off)"
        )


if __name__ == "__main__":
    main()
