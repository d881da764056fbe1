"""``mtp-studio bench decode``: plain decoding vs MTP (LC) vs MTP (match), side by side.

Runs the fixed prompt set of :mod:`app.engine.runtime.bench.decode_bench` through the inference
worker in one run and prints, per mode: decode tok/s, TTFT, acceptance by depth, mean accepted
length, the measured draft/verify cost ratio c, the speedup over plain decoding and Leviathan's
expected speedup for the measured α and c — then the targets and whether they were met. ``--wide F``
runs the same table on a memory-bound stand-in of the model
(:mod:`~app.engine.runtime.bench.wide_model`), and ``--vs-llama-server PATH`` adds llama.cpp's own
MTP loop on the same prompts.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import ExitStack
from pathlib import Path

from app.commands.chat import (
    add_model_arguments,
    add_threads_argument,
    describe_backend,
    open_client,
    stand_in,
)
from app.engine.errors import RuntimeBackendError
from app.engine.runtime.bench.decode_bench import (
    ADAPTIVE_MODES,
    DecodeBenchmark,
    run_decode_benchmark,
)
from app.engine.runtime.bench.interval import RESAMPLES
from app.engine.runtime.bench.llama_server import LlamaServerPool
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.cpu_threads import choose_threads
from app.engine.runtime.core.demo_model import demo_model_path
from app.engine.runtime.core.request import MAX_DRAFT_DEPTH
from app.engine.runtime.speculative.depth_policy import AUTO_MAX_DEPTH, DEFAULT_MTP_DEPTH


def register(benchmarks: argparse._SubParsersAction) -> None:
    parser = benchmarks.add_parser(
        "decode",
        help="decode speed: plain vs MTP (LC) vs MTP (match)",
        description=(
            "Decode a fixed prompt set with plain decoding and with MTP speculative decoding "
            "(Leviathan–Chen and sample-and-compare acceptance) at each depth, interleaved in "
            "one run, and print speed, acceptance, cost ratio and speedups side by side."
        ),
    )
    add_model_arguments(parser)
    parser.add_argument(
        "--depths", default="1,2,3", metavar="K,K", help="draft depths to compare (default 1,2,3)"
    )
    parser.add_argument("--temp", type=float, default=0.6, metavar="T", help="default 0.6")
    parser.add_argument("--max-tokens", type=int, default=128, metavar="N", help="per request")
    parser.add_argument("--repeats", type=int, default=2, metavar="N", help="passes over prompts")
    add_threads_argument(parser)
    parser.add_argument("--top-k", type=int, default=20, metavar="N", help="as chat (default 20)")
    parser.add_argument(
        "--top-p", type=float, default=0.95, metavar="P", help="as chat (default 0.95)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--wide",
        type=int,
        default=1,
        metavar="F",
        help="run on a memory-bound stand-in: every FFN widened F× with zero channels (same "
        "tokens, F× the FFN bytes), written to a temporary folder",
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
        "--vs-llama-server",
        type=Path,
        metavar="PATH",
        help="also run llama.cpp's own MTP loop (llama-server --spec-type draft-mtp) on the "
        "same prompts in the same run (build: packaging/build_llama_server.sh)",
    )
    parser.add_argument(
        "--penalties",
        action="store_true",
        help="also run plain decoding and the deepest depth with presence 0.5, frequency 0.5 "
        "and repetition 1.1 penalties and an 8-token logit bias, side by side with the rest",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.set_defaults(func=run)


def _depths(text: str) -> list[int]:
    try:
        depths = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        depths = []
    if not depths or not all(1 <= depth <= MAX_DRAFT_DEPTH for depth in depths):
        raise RuntimeBackendError(
            f"--depths {text!r} is invalid: give comma-separated depths from 1 to "
            f"{MAX_DRAFT_DEPTH}, e.g. 1,2,3"
        )
    return depths


def run(args: argparse.Namespace) -> int:
    depths = _depths(args.depths)
    settings = LoadSettings(threads=args.threads, max_draft_depth=max(max(depths), AUTO_MAX_DEPTH))
    progress = (lambda _m: None) if args.json else (lambda m: print(f"… {m}", file=sys.stderr))
    with ExitStack() as stack:
        model = Path(args.model) if args.model is not None else demo_model_path()
        model = stand_in(model, args, stack, progress)
        client = stack.enter_context(open_client(args, settings, model))
        info = client.load()
        progress(describe_backend(client))
        servers = None
        if args.vs_llama_server is not None:
            progress("starting llama-server: plain and draft-mtp at each depth")
            threads = info.threads or choose_threads(args.threads)  # the same as ours
            servers = LlamaServerPool(
                args.vs_llama_server,
                model,
                depths=depths,
                threads=threads.threads,
                batch_threads=threads.batch_threads,
                drafter=client.drafter,
            )
            stack.callback(servers.close)
        benchmark = run_decode_benchmark(
            client,
            depths=depths,
            temperature=args.temp,
            max_tokens=args.max_tokens,
            repeats=args.repeats,
            seed=args.seed,
            top_k=args.top_k,
            top_p=args.top_p,
            llama_server=servers,
            progress=progress,
            penalties=args.penalties,
        )
    if args.json:
        print(json.dumps(benchmark.to_dict(), indent=2))
    else:
        print(render(benchmark))
    return 0


def render(benchmark: DecodeBenchmark) -> str:
    """The side-by-side table, the cost figures and the target checks."""
    lines = [
        f"model {benchmark.model} · backend {benchmark.backend}",
        f"{benchmark.prompts} prompts × {benchmark.repeats} repeats, {benchmark.max_tokens} "
        f"tokens each, temperature {benchmark.temperature}",
        "",
        f"{'mode':<18}{'tok/s':>9}{'CPU tok/s':>10}{'TTFT ms':>9}{'speedup':>9}{'expected':>10}"
        f"{'ratio':>7}"
        f"{'parts':>8}{'loop':>6}{'tok/cyc':>9}{'c':>7}{'α':>6}  acceptance by depth",
    ]
    for row in benchmark.rows:
        acceptance = " / ".join(f"{rate:.0%}" for rate in row.acceptance_by_depth)
        if row.depth == 0:
            cycle_columns = f"{'—':>10}{'—':>7}{'—':>8}{'—':>6}{'—':>9}{'—':>7}{'—':>6}  —"
        elif row.variable_depth:
            cycle_columns = (
                f"{'—':>10}{'—':>7}{'—':>8}{'—':>6}{row.tokens_per_cycle:>9.2f}{'—':>7}{'—':>6}"
                f"  {acceptance} (mean depth {row.mean_draft_depth:.2f})"
            )
        else:
            cycle_columns = (
                f"{row.expected_speedup:>9.2f}×{row.speedup_to_expected:>7.2f}"
                f"{row.parts_speedup:>7.2f}×{row.loop_overhead:>6.0%}"
                f"{row.tokens_per_cycle:>9.2f}{row.cost_ratio:>7.2f}{row.alpha:>6.2f}  {acceptance}"
            )
        lines.append(
            f"{row.label:<18}{row.decode_tokens_per_second:>9.1f}"
            f"{row.clock_tokens_per_second:>10.1f}"
            f"{row.mean_ttft_seconds * 1000:>9.1f}{row.speedup:>8.2f}×{cycle_columns}"
        )
    step_ms = benchmark.ar_seconds_per_token * 1000
    best = benchmark.row("lc", benchmark.best_depth)
    lines += [
        "",
        f"plain decoding: {step_ms:.3f} ms per token; verify call / plain step cost by depth: "
        + ", ".join(
            f"K={depth} {benchmark.row('lc', depth).verify_to_step:.2f}×"
            for depth in benchmark.depths
        ),
        "expected = Leviathan (1 − α^{K+1}) / ((1 − α)(K·c + 1)), c = draft step / verify call; "
        "ratio = speedup / expected",
        "parts = tok/cyc × plain step / (K·draft step + verify call); loop = 1 − speedup / parts",
        f"auto = depth chosen before each cycle (0–{AUTO_MAX_DEPTH}) from the acceptance and "
        "cycle times measured so far (kept per model and machine across runs); a request where "
        "drafting loses runs plainly, without rollback snapshots; default = no flags "
        f"(--mtp-depth {DEFAULT_MTP_DEPTH})",
        "CPU tok/s = tokens per second of the decoding thread's CPU time (one-thread CPU "
        "backends; elsewhere wall time): the same runs without the time other processes took "
        "the core (their contention for memory still counts)",
        "default, auto, auto-unsure / max(plain, best fixed depth): "
        + ", ".join(
            f"{mode} {benchmark.to_best(mode):.3f} (CPU time "
            f"{benchmark.to_best(mode, clock=True):.3f}{_interval_text(benchmark, mode)})"
            for mode in ADAPTIVE_MODES
        ),
        "unsure stop = a cycle's draft ends at a token the head is unsure of when the measured "
        "acceptance of its confidence band and the draft step's cost say it would not pay "
        "(threshold learned, not fixed; still exact)",
        f"90 % interval = {RESAMPLES} resamplings of the {benchmark.prompts * benchmark.repeats} "
        "prompt × repeat pairs, every mode's requests on a pair moving together: how far the "
        "ratio could move with other prompts of the kind (more --repeats narrow it)",
        "ratio = (plain step / verify call) × (1 − loop): Leviathan takes a verify call to cost "
        f"one plain step; here it costs {best.verify_to_step:.2f}× at K={best.depth}, so the ratio "
        f"cannot exceed {best.expected_ceiling:.2f} with a loop that costs nothing",
        "",
        f"targets (best depth K={benchmark.best_depth}):",
    ]
    lines += [f"  [{'ok' if met else 'MISSED'}] {name}" for name, met in benchmark.checks.items()]
    lines += ["", *_host_lines(benchmark), *_penalty_lines(benchmark)]
    if benchmark.drafts_stopped is not None:
        lines += ["", f"DRAFTS BROKEN on this backend — {benchmark.drafts_stopped}"]
    if benchmark.llama_server_rows:
        lines += ["", *_llama_server_lines(benchmark)]
    return "\n".join(lines)


def _host_lines(benchmark: DecodeBenchmark) -> list[str]:
    """Per mode: the loop's own time per token next to the model's (forward passes)."""
    if not any(row.model_seconds for row in benchmark.rows):
        return ["host time per token: not measured by this backend"]
    lines = [
        "time per token: host = ours outside the model's forward passes (sampling, acceptance, "
        "text, stop rules, statistics, chunks to the front end); model = inside them",
        f"{'mode':<18}{'host ms':>9}{'model ms':>10}{'host share':>12}",
    ]
    for row in benchmark.rows:
        host, model = row.host_seconds_per_token, row.model_seconds_per_token
        share = host / (host + model) if host + model > 0 else 0.0
        lines.append(f"{row.label:<18}{host * 1000:>9.3f}{model * 1000:>10.3f}{share:>12.1%}")
    return lines


def _penalty_lines(benchmark: DecodeBenchmark) -> list[str]:
    """Decode speed without and with penalties, for plain decoding and the deepest depth."""
    pairs = benchmark.penalty_cost()
    if not pairs:
        return []
    lines = ["", "penalties on vs off (presence 0.5, frequency 0.5, repetition 1.1, 8 biased ids):"]
    for off, on in pairs:
        rate_off, rate_on = off.decode_tokens_per_second, on.decode_tokens_per_second
        ratio = rate_on / rate_off if rate_off else 0.0
        clock = (
            on.clock_tokens_per_second / off.clock_tokens_per_second
            if off.clock_tokens_per_second
            else 0.0
        )
        lines.append(
            f"  {off.label:<18}{rate_off:>9.1f} → {rate_on:>7.1f} tok/s  ({ratio:.3f}×; CPU "
            f"time {clock:.3f}×; host {off.host_seconds_per_token * 1000:.3f} → "
            f"{on.host_seconds_per_token * 1000:.3f} ms/token)"
        )
    return lines


def _interval_text(benchmark: DecodeBenchmark, mode: str) -> str:
    interval = benchmark.to_best_intervals.get(mode)
    return "" if interval is None else f"; 90 % interval {interval.low:.3f}–{interval.high:.3f}"


def _llama_server_lines(benchmark: DecodeBenchmark) -> list[str]:
    """llama.cpp's own loop beside ours: tok/s, speedup over its plain, acceptance, ours/its."""
    servers = benchmark.llama_server_rows
    server_plain = servers[0].decode_tokens_per_second
    lines = [
        "llama.cpp's own loop on the same prompts, same run (llama-server; acceptance = "
        "draft_n_accepted / draft_n):",
        f"{'mode':<26}{'tok/s':>9}{'speedup':>9}{'accept':>8}{'ours tok/s':>12}{'ours/its':>10}",
    ]
    for row in servers:
        if not row.depth:
            ours = benchmark.only("ar")
        elif row.p_min:  # its confidence stop beside ours
            ours = benchmark.only("lc-unsure")
        else:
            ours = benchmark.row("lc", row.depth)
        ours_rate = ours.decode_tokens_per_second
        speedup = row.decode_tokens_per_second / server_plain if server_plain else 0.0
        accept = f"{row.acceptance:.0%}" if row.depth else "—"
        ratio = ours_rate / row.decode_tokens_per_second if row.decode_tokens_per_second else 0.0
        lines.append(
            f"{row.label:<26}{row.decode_tokens_per_second:>9.1f}{speedup:>8.2f}×{accept:>8}"
            f"{ours_rate:>12.1f}{ratio:>9.2f}×"
        )
    return lines
