"""The first turn of a long conversation, ours beside llama-server's, repeated and interleaved.

    python bench/bench_first_turn.py --vs-llama-server PATH [--threads N] [--rounds 3]
                                     [--requirements 45] [--model PATH]

``bench chat`` plays a whole conversation once, so its first turn — a ~2k-token message that
nothing kept can shorten, all prefill — is one sample per run; on a shared machine one sample
says little. This sends that first message (``bench chat``'s, :func:`first_message`, each round
numbered so no prompt cache matches) to four configurations in turn, the order alternating
between rounds: ours plain and with MTP (depth 4: the drafting lane, whose prefill also runs the
MTP head over the prompt), llama-server plain and with its MTP (``--spec-type draft-mtp``), all
at the same threads (``--threads`` 0: each side's default, the physical cores). Per
configuration: the prompt's tokens and the time from sending to the first token as the caller
sees it (the median and every round), and ours over llama-server's per pair.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.engine.runtime.bench.chat_bench import first_message, measure_prompt
from app.engine.runtime.bench.llama_server import LlamaServer
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.cpu_threads import choose_threads
from app.engine.runtime.core.demo_model import demo_model_path
from app.engine.runtime.core.request import GenerationRequest
from app.engine.runtime.process.client import RuntimeClient
from app.engine.runtime.sampling.sampler import SamplerSettings

GREEDY = SamplerSettings(temperature=0.0)
DEPTH = 4
Send = Callable[[str], tuple[float, int]]  # message → (seconds to the first token, prompt tokens)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vs-llama-server", type=Path, required=True, metavar="PATH")
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--threads", type=int, default=0, metavar="N", help="0: the default")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requirements", type=int, default=45, metavar="N", help="~42 tokens each")
    args = parser.parse_args()
    model = args.model or demo_model_path()
    threads = choose_threads(args.threads)
    with ExitStack() as stack:
        client = stack.enter_context(
            RuntimeClient(model, settings=LoadSettings(threads=args.threads))
        )
        client.load()
        servers = {}
        for depth in (0, DEPTH):
            server = LlamaServer(
                args.vs_llama_server,
                model,
                depth=depth,
                threads=threads.threads,
                batch_threads=threads.batch_threads,
                context=4096,
            )
            stack.callback(server.close)
            servers[depth] = server
        for server in servers.values():
            server.wait_ready()
        jobs: dict[str, Send] = {
            "ours plain": lambda text: _ours(client, text, 0),
            f"ours MTP K={DEPTH}": lambda text: _ours(client, text, DEPTH),
            "llama-server plain": lambda text: _its(servers[0], text),
            f"llama-server MTP K={DEPTH}": lambda text: _its(servers[DEPTH], text),
        }
        figures = _run(jobs, args)
    print(f"model {model.name} · {threads.describe()} · {args.rounds} rounds, interleaved")
    for name, pairs in figures.items():
        rounds = " ".join(f"{seconds * 1000:.0f}" for seconds, _ in pairs)
        print(
            f"  {name:<24}{pairs[0][1]:>6} tokens   first token {_median(pairs) * 1000:8.1f} ms "
            f"(rounds: {rounds})"
        )
    pairs = (
        ("ours plain", "llama-server plain"),
        (f"ours MTP K={DEPTH}", f"llama-server MTP K={DEPTH}"),
    )
    for ours, its in pairs:
        ratio = _median(figures[ours]) / _median(figures[its])
        print(f"  {ours} / {its}: {ratio:.2f}×")
    return 0


def _run(jobs: dict[str, Send], args: argparse.Namespace) -> dict[str, list[tuple[float, int]]]:
    for send in jobs.values():  # warm-up: a short message
        send(first_message(3))
    figures: dict[str, list[tuple[float, int]]] = {name: [] for name in jobs}
    for round_index in range(args.rounds):
        order = list(jobs.items())
        for name, send in order if round_index % 2 == 0 else order[::-1]:
            figures[name].append(send(f"{round_index + 1}. {first_message(args.requirements)}"))
        print(f"… round {round_index + 1}/{args.rounds}", file=sys.stderr)
    return figures


def _ours(client: RuntimeClient, text: str, depth: int) -> tuple[float, int]:
    request = GenerationRequest(
        messages=(ChatMessage("user", text),), max_tokens=4, sampler=GREEDY, mtp_depth=depth
    )
    _result, figures = measure_prompt(client, request)
    return figures.client_ttft_seconds, figures.prompt_tokens


def _its(server: LlamaServer, text: str) -> tuple[float, int]:
    timings = server.prompt_timings([ChatMessage("user", text)], GREEDY, 4)
    return timings.first_token_seconds, timings.cached_tokens + timings.computed_tokens


def _median(pairs: list[tuple[float, int]]) -> float:
    return statistics.median(seconds for seconds, _ in pairs)


if __name__ == "__main__":
    sys.exit(main())
