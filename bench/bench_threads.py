"""Plain decoding at each thread count, ours beside llama-server's, interleaved in one run.

    python bench/bench_threads.py --vs-llama-server PATH [--threads 1,2] [--wide F] [--vocab V]

Answers two questions about threads: does our plain loop keep up with llama.cpp's own
(``llama-server``, no drafting) at the same thread count, and does the default thread count
(what llama.cpp's tools use: :func:`~app.engine.runtime.core.cpu_threads.choose_threads`) reach
the best one? Every configuration is loaded at once — one inference worker and one llama-server
per thread count, and a worker with the default — and each prompt goes to all of them in turn,
the order alternating between rounds, so a moment of load on a shared machine falls on every
configuration alike. Greedy decoding with the chat's sampler off, so both decode the same
tokens. Per configuration it prints decode tok/s (llama-server's from its ``timings``), the
ratio ours / llama-server's and the default's ratio to the best count, each with a 90 % paired
bootstrap interval over the prompt × round pairs (:mod:`app.engine.runtime.bench.interval`).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.engine.runtime.bench.decode_bench import PROMPTS
from app.engine.runtime.bench.interval import to_best_interval
from app.engine.runtime.bench.llama_server import LlamaServer
from app.engine.runtime.bench.wide_model import widened_copy
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.cpu_threads import choose_threads
from app.engine.runtime.core.demo_model import demo_model_path
from app.engine.runtime.core.request import GenerationRequest
from app.engine.runtime.process.client import RuntimeClient
from app.engine.runtime.sampling.sampler import SamplerSettings

Pairs = list[tuple[int, float]]  # (tokens, decode seconds) per prompt × round
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (Linux ``/proc``; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vs-llama-server", type=Path, required=True, metavar="PATH")
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--threads", default="", metavar="N,N", help="default: 1 and the default")
    parser.add_argument("--wide", type=int, default=1, metavar="F")
    parser.add_argument("--vocab", type=int, default=0, metavar="V")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64, metavar="N")
    parser.add_argument(
        "--no-default", action="store_true", help="leave out the worker with the default count"
    )
    args = parser.parse_args()
    default = choose_threads(0)
    counts = sorted({int(n) for n in args.threads.split(",") if n} or {1, default.threads})
    with ExitStack() as stack:
        model = args.model or demo_model_path()
        if args.wide != 1 or args.vocab:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mtp-threads-")))
            model = widened_copy(model, args.wide, folder, vocab=args.vocab)
        ours = {n: _client(stack, model, n) for n in counts}
        if not args.no_default:
            ours["default"] = _client(stack, model, 0)
        servers = {}
        for n in counts:
            servers[n] = stack.enter_context(_server(args.vs_llama_server, model, n))
        for server in servers.values():
            server.wait_ready()
        figures = _run(ours, servers, args)
        chosen = ours["default"].info if "default" in ours else None
    described = chosen.threads.describe() if chosen and chosen.threads else default.describe()
    _report(model, described, counts, figures, args)
    return 0


def _client(stack: ExitStack, model: Path, threads: int) -> RuntimeClient:
    settings = LoadSettings(threads=threads)
    client = stack.enter_context(RuntimeClient(model, settings=settings))
    client.load()
    return client


class _server:
    """A plain llama-server at ``threads`` for steps and batches, closed on exit."""

    def __init__(self, binary: Path, model: Path, threads: int) -> None:
        self._server = LlamaServer(binary, model, depth=0, threads=threads, context=4096)

    def __enter__(self) -> LlamaServer:
        return self._server

    def __exit__(self, *_exc: object) -> None:
        self._server.close()


def _run(
    ours: dict[object, RuntimeClient], servers: dict[int, LlamaServer], args: argparse.Namespace
) -> dict[str, Pairs]:
    """Every prompt to every configuration, twice: a reply of ``--max-tokens`` (its decode
    rate) and a reply of one token; the process CPU time of the two gives the CPU time of the
    decoded tokens alone. Each request's prompt is new to every configuration (numbered), so no
    prompt cache makes one request cheaper than another."""
    sampler = SamplerSettings(temperature=0.0)
    jobs = [(f"ours {n}", client) for n, client in ours.items()]
    jobs += [(f"llama-server {n}", server) for n, server in servers.items()]
    figures: dict[str, Pairs] = {name: [] for name, _ in jobs}
    cpu = {name: [0, 0.0] for name, _ in jobs}  # decoded tokens, their CPU seconds
    for _name, runner in jobs:  # warm-up
        _decode(runner, "Hello.", sampler, args.max_tokens)
    request = 0
    for round_index in range(args.rounds):
        for prompt in PROMPTS:
            request += 1
            order = jobs if round_index % 2 == 0 else jobs[::-1]
            for name, runner in order:
                pid = _pid(runner)
                started = _cpu_seconds(pid)
                long = _decode(runner, f"{request}. {prompt}", sampler, args.max_tokens)
                middle = _cpu_seconds(pid)
                short = _decode(runner, f"{request}'. {prompt}", sampler, 1)
                cpu[name][0] += long[0] - short[0]
                cpu[name][1] += (middle - started) - (_cpu_seconds(pid) - middle)
                figures[name].append(long)
        print(f"… round {round_index + 1}/{args.rounds}", file=sys.stderr)
    for name, (tokens, seconds) in cpu.items():
        figures[f"{name} cpu"] = [(tokens, seconds)]
    return figures


def _pid(runner: RuntimeClient | LlamaServer) -> int:
    return runner.pid if isinstance(runner, LlamaServer) else runner.worker_pid or 0


def _decode(
    runner: RuntimeClient | LlamaServer, prompt: str, sampler: SamplerSettings, tokens: int
) -> tuple[int, float]:
    if isinstance(runner, LlamaServer):
        reply = runner.reply(prompt, sampler, tokens, record=False)
        return reply.tokens, reply.decode_seconds
    request = GenerationRequest(
        messages=(ChatMessage("user", prompt),), max_tokens=tokens, sampler=sampler, mtp_depth=0
    )
    stats = runner.generate(request).stats
    return stats.generated_tokens, stats.decode_seconds


def _rate(pairs: Pairs) -> float:
    return sum(t for t, _ in pairs) / sum(s for _, s in pairs)


def _report(
    model: Path,
    default: str,
    counts: list[int],
    figures: dict[str, Pairs],
    args: argparse.Namespace,
) -> None:
    print(
        f"model {model.name} · plain decoding, greedy, {args.max_tokens} tokens per request · "
        f"{args.rounds} rounds × {len(PROMPTS)} prompts · default here: {default}"
    )
    print(
        f"{'threads':>8}{'ours tok/s':>12}{'llama-server':>14}{'ours/its':>10}  90 % interval"
        f"{'CPU ms/token ours':>20}{'its':>7}"
    )
    for n in counts:
        ours, its = figures[f"ours {n}"], figures[f"llama-server {n}"]
        interval = to_best_interval(ours, [its])
        ours_cpu = 1000 / _rate(figures[f"ours {n} cpu"])
        its_cpu = 1000 / _rate(figures[f"llama-server {n} cpu"])
        print(
            f"{n:>8}{_rate(ours):>12.1f}{_rate(its):>14.1f}{_rate(ours) / _rate(its):>10.3f}"
            f"  {interval.low:.3f}–{interval.high:.3f}{ours_cpu:>20.3f}{its_cpu:>7.3f}"
        )
    print(
        "CPU ms/token = the process CPU time of a reply of --max-tokens minus that of a "
        "one-token reply to the same prompt, per extra token (the worker's, llama-server's): "
        "with one thread, what a token costs however much of the core other processes took; "
        "with more, threads spinning at barriers count too"
    )
    if "ours default" not in figures:
        return
    default_pairs = figures["ours default"]
    fixed = [figures[f"ours {n}"] for n in counts]
    best = max(_rate(pairs) for pairs in fixed)
    interval = to_best_interval(default_pairs, fixed)
    print(
        f"default {_rate(default_pairs):.1f} tok/s = {_rate(default_pairs) / best:.3f} × the best "
        f"fixed count (90 % interval {interval.low:.3f}–{interval.high:.3f})"
    )


if __name__ == "__main__":
    sys.exit(main())
