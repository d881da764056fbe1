"""``mtp-studio bench decode``: plain decoding vs MTP (LC) vs MTP (match), side by side.

Runs the fixed prompt set of :mod:`app.engine.runtime.decode_bench` through the inference worker
in one run and prints, per mode: decode tok/s, TTFT, acceptance by depth, mean accepted length,
the measured draft/verify cost ratio c, the speedup over plain decoding and Leviathan's expected
speedup for the measured α and c — then the targets and whether they were met.
"""

from __future__ import annotations

import argparse
import json
import sys

from app.commands.chat import add_model_arguments, describe_backend, open_client
from app.engine.errors import RuntimeBackendError
from app.engine.runtime.backend import LoadSettings
from app.engine.runtime.decode_bench import DecodeBenchmark, run_decode_benchmark
from app.engine.runtime.depth_policy import AUTO_MAX_DEPTH
from app.engine.runtime.request import MAX_DRAFT_DEPTH


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
    parser.add_argument("--threads", type=int, default=0, metavar="N", help="CPU threads")
    parser.add_argument("--seed", type=int, default=0)
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
    with open_client(args, settings) as client:
        progress(describe_backend(client))
        benchmark = run_decode_benchmark(
            client,
            depths=depths,
            temperature=args.temp,
            max_tokens=args.max_tokens,
            repeats=args.repeats,
            seed=args.seed,
            progress=progress,
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
        f"{'mode':<18}{'tok/s':>9}{'TTFT ms':>9}{'speedup':>9}{'expected':>10}{'ratio':>7}"
        f"{'parts':>8}{'loop':>6}{'tok/cyc':>9}{'c':>7}{'α':>6}  acceptance by depth",
    ]
    for row in benchmark.rows:
        acceptance = " / ".join(f"{rate:.0%}" for rate in row.acceptance_by_depth)
        if row.mode == "ar":
            cycle_columns = f"{'—':>10}{'—':>7}{'—':>8}{'—':>6}{'—':>9}{'—':>7}{'—':>6}  —"
        elif row.mode == "auto":
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
        "cycle times measured so far",
        "ratio = (plain step / verify call) × (1 − loop): Leviathan takes a verify call to cost "
        f"one plain step; here it costs {best.verify_to_step:.2f}× at K={best.depth}, so the ratio "
        f"cannot exceed {best.expected_ceiling:.2f} with a loop that costs nothing",
        "",
        f"targets (best depth K={benchmark.best_depth}):",
    ]
    lines += [f"  [{'ok' if met else 'MISSED'}] {name}" for name, met in benchmark.checks.items()]
    return "\n".join(lines)
