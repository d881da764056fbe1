"""``mtp-studio bench chat``: time to first token per turn of a growing conversation.

Plays a fixed conversation of ``--turns`` turns whose history grows to about
``--history-tokens`` (:mod:`app.engine.runtime.bench.chat_bench`) through the inference worker and
prints, per turn: the prompt tokens, how many were reused from the state kept since the last
turn and how many computed, and the time to first token — beside the same prompts computed
from scratch (the cold column; ``--no-cold`` skips it) and, with ``--vs-llama-server PATH``,
llama-server's prompt cache on the same conversation. Then the memory the kept states hold and
the median TTFT of turns 2..N with the ratios.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from contextlib import ExitStack
from pathlib import Path

from app.commands.chat import (
    add_model_arguments,
    add_threads_argument,
    depth_argument,
    describe_backend,
    open_client,
    stand_in,
)
from app.engine.errors import RuntimeBackendError
from app.engine.runtime.bench.chat_bench import (
    COLD_METHOD,
    ChatBenchmark,
    ChatBenchSettings,
    run_chat_benchmark,
)
from app.engine.runtime.bench.llama_server import LlamaServer
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.cpu_threads import choose_threads
from app.engine.runtime.core.demo_model import demo_model_path
from app.engine.runtime.core.request import check_mtp_depth
from app.engine.runtime.speculative.depth_policy import AUTO, AUTO_MAX_DEPTH, DEFAULT_MTP_DEPTH
from app.engine.units import format_bytes


def register(benchmarks: argparse._SubParsersAction) -> None:
    parser = benchmarks.add_parser(
        "chat",
        help="time to first token per turn of a growing conversation",
        description=(
            "Play a fixed multi-turn conversation (a long first message, short follow-ups, the "
            "model's own replies kept in the history) and print per turn the prompt tokens "
            "reused and computed and the time to first token, beside every turn computed from "
            "scratch and, optionally, llama-server's prompt cache."
        ),
    )
    add_model_arguments(parser)
    parser.add_argument("--turns", type=int, default=6, metavar="N", help="default 6")
    parser.add_argument(
        "--history-tokens",
        type=int,
        default=2000,
        metavar="N",
        help="about how long the last turn's prompt is (default 2000)",
    )
    parser.add_argument(
        "--max-tokens", type=int, default=32, metavar="N", help="per reply (default 32)"
    )
    parser.add_argument(
        "--mtp-depth",
        type=depth_argument,
        default=DEFAULT_MTP_DEPTH,
        metavar="K|auto",
        help=f"as chat: 0 = plain decoding (default {DEFAULT_MTP_DEPTH})",
    )
    parser.add_argument(
        "--temp",
        type=float,
        default=0.0,
        metavar="T",
        help="default 0 (greedy): llama-server then writes the replies ours did, so its cache "
        "holds the same conversation and both compute the same new tokens each turn",
    )
    parser.add_argument("--seed", type=int, default=0)
    add_threads_argument(parser)
    parser.add_argument(
        "--ctx",
        type=int,
        default=0,
        metavar="N",
        help="context window; 0 (default) = min(4096, the model's trained context)",
    )
    parser.add_argument(
        "--wide",
        type=int,
        default=1,
        metavar="F",
        help="run on a memory-bound stand-in: every FFN widened F× with zero channels",
    )
    parser.add_argument(
        "--vocab",
        type=int,
        default=0,
        metavar="V",
        help="run on a stand-in whose vocabulary is padded to V tokens (e.g. 151936 as Qwen3, "
        "262144): unused tokens with zero rows, so every step returns a V-wide logits row",
    )
    parser.add_argument(
        "--no-cold",
        action="store_true",
        help="skip the column of every turn computed from scratch",
    )
    parser.add_argument(
        "--vs-llama-server",
        type=Path,
        metavar="PATH",
        help="also send every turn to llama-server (prompt cache on) on the same GGUF, context "
        "and threads (build: packaging/build_llama_server.sh)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    depth = AUTO_MAX_DEPTH if args.mtp_depth == AUTO else int(args.mtp_depth)
    check_mtp_depth(depth)
    settings = ChatBenchSettings(
        turns=args.turns,
        history_tokens=args.history_tokens,
        max_tokens=args.max_tokens,
        mtp_depth=depth,
        adaptive_depth=args.mtp_depth == AUTO,
        temperature=args.temp,
        seed=args.seed,
    )
    load = LoadSettings(
        context_length=args.ctx,
        threads=args.threads,
        max_draft_depth=max(depth, LoadSettings().max_draft_depth),
    )
    progress = (lambda _m: None) if args.json else (lambda m: print(f"… {m}", file=sys.stderr))
    with ExitStack() as stack:
        model = Path(args.model) if args.model is not None else demo_model_path()
        model = stand_in(model, args, stack, progress)
        client = stack.enter_context(open_client(args, load, model))
        info = client.load()
        progress(describe_backend(client))
        threads = info.threads or choose_threads(args.threads)
        server = None
        if args.vs_llama_server is not None:
            if not args.vs_llama_server.is_file():
                raise RuntimeBackendError(
                    f"--vs-llama-server {args.vs_llama_server}: no such file; build it with "
                    "`bash packaging/build_llama_server.sh`, which prints its path"
                )
            server_depth = depth if info.mtp_available else 0
            progress("starting llama-server" + (f" (MTP K={server_depth})" if server_depth else ""))
            server = LlamaServer(
                args.vs_llama_server,
                model,
                depth=server_depth,
                threads=threads.threads,
                batch_threads=threads.batch_threads,
                context=info.context_length,
            )
            stack.callback(server.close)
            server.wait_ready()
        cold = None
        if not args.no_cold:
            cold_load = dataclasses.replace(load, state_cache_mib=0)
            cold = stack.enter_context(open_client(args, cold_load, model))
        benchmark = run_chat_benchmark(
            client,
            settings,
            cold_client=cold,
            llama_server=server,
            threads=threads.threads,
            progress=progress,
        )
    if args.json:
        print(json.dumps(benchmark.to_dict(), indent=2))
    else:
        print(render(benchmark))
    return 0


def render(benchmark: ChatBenchmark) -> str:
    """One row per turn, then the kept-state memory and the medians of turns 2..N."""
    lines = [
        f"model {benchmark.model} · backend {benchmark.backend} · {benchmark.depth} · "
        f"{benchmark.threads} threads · context {benchmark.context_length}",
        f"{len(benchmark.turns)} turns, replies ≤ {benchmark.max_tokens} tokens at temperature "
        f"{benchmark.temperature:g}, history to about {benchmark.history_tokens} tokens",
        "",
    ]
    header = f"{'turn':>4}{'prompt':>8}{'reused':>8}{'computed':>10}{'TTFT ms':>9}{'client ms':>11}"
    if benchmark.has_cold:
        header += f"  │{'cold computed':>14}{'cold TTFT ms':>13}"
    if benchmark.server_label:
        header += f"  │{'server cached':>14}{'computed':>9}{'prompt ms':>10}{'client ms':>11}"
    lines.append(header)
    for turn in benchmark.turns:
        ours = turn.ours
        row = (
            f"{turn.turn:>4}{ours.prompt_tokens:>8}{ours.reused_tokens:>8}"
            f"{ours.computed_tokens:>10}{ours.ttft_seconds * 1000:>9.1f}"
            f"{ours.client_ttft_seconds * 1000:>11.1f}"
        )
        if turn.cold is not None:
            row += f"  │{turn.cold.computed_tokens:>14}{turn.cold.ttft_seconds * 1000:>13.1f}"
        if turn.server is not None:
            server = turn.server
            row += (
                f"  │{server.cached_tokens:>14}{server.computed_tokens:>9}"
                f"{server.prompt_seconds * 1000:>10.1f}{server.first_token_seconds * 1000:>11.1f}"
            )
        lines.append(row)
    lines += ["", f"kept states after the last turn: {format_bytes(benchmark.kept_state_bytes)}"]
    if len(benchmark.turns) > 1:
        lines += _medians(benchmark)
    lines += [
        "",
        "reused = prompt tokens whose state was kept from the previous turn; TTFT = the "
        "worker's figure, from the tokenized prompt (prefill, first sample) to the first token; "
        "client = from the caller's request (template, tokenizing and the process hop "
        "included) to the first streamed chunk: what a chat window waits",
    ]
    if benchmark.has_cold:
        lines.append(COLD_METHOD)
    if benchmark.server_label:
        lines.append(
            f"server = {benchmark.server_label}, prompt cache on, sent each turn right after "
            "ours with the same history (our replies): cached = timings.cache_n, computed = "
            "timings.prompt_n, prompt ms = timings.prompt_ms (its prefill only), client = from "
            "sending the streamed request to its first event; its cache holds its own last "
            "reply, so where that differs from ours (temperature above 0) it computes our "
            "reply's tokens too"
        )
    return "\n".join(lines)


def _medians(benchmark: ChatBenchmark) -> list[str]:
    """The medians of turns 2..N: in the worker (with the cold column), then as a caller sees
    them (with llama-server's)."""
    span = f"median of turns 2–{len(benchmark.turns)}"
    ours = benchmark.median_ttft
    worker = f"{span}, TTFT in the worker: ours {ours * 1000:.1f} ms"
    if benchmark.has_cold:
        cold = benchmark.median_cold_ttft
        worker += f" · cold {cold * 1000:.1f} ms"
        if ours > 0:
            worker += f" (cold / ours {cold / ours:.1f}×)"
    client = benchmark.median_client_ttft
    caller = f"{span}, first token as the caller sees it: ours {client * 1000:.1f} ms"
    if benchmark.server_label:
        server = benchmark.median_server_first_token
        caller += f" · llama-server {server * 1000:.1f} ms"
        if server > 0:
            caller += f" (ours / llama-server {client / server:.2f}×)"
        caller += f" · llama-server's prompt_ms {benchmark.median_server_prompt * 1000:.1f} ms"
    return [worker, caller]
