"""``mtp-studio bench extract``: MTP extraction against the I/O floor, and its peak memory.

Generates a DeepSeek-shaped FP8 checkpoint (a few GB by default) in a temporary folder, measures
the I/O floor and the extraction in the same run, prints both with their ratio and the targets
(≤ 2× the floor, ≤ 300 MB RSS above the interpreter), and deletes everything.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from app.commands.progress import ProgressPrinter
from app.engine.jobs import JobContext
from app.engine.mtp.benchmark import (
    RATIO_TARGET,
    READ_TARGET,
    RSS_TARGET_BYTES,
    ExtractBenchmark,
    run_extract_benchmark,
)
from app.engine.mtp.synthetic import DEEPSEEK_V3_HIDDEN
from app.engine.units import format_bytes


def register(benchmarks: argparse._SubParsersAction) -> None:
    parser = benchmarks.add_parser(
        "extract",
        help="extraction speed vs the I/O floor, and peak RSS",
        description=(
            "Generate a synthetic FP8 checkpoint, then measure in one run the I/O floor (read the "
            "MTP bytes once + write a file of the BF16 sidecar's size once, page-cached) and "
            "extraction (throughput, time ratio to the floor, peak RSS above the interpreter)."
        ),
    )
    parser.add_argument(
        "--mtp-gb",
        type=float,
        default=2.2,
        help="FP8 bytes of the MTP layer, in GB (default 2.2)",
    )
    parser.add_argument(
        "--trunk-gb", type=float, default=1.0, help="other checkpoint bytes, in GB (default 1.0)"
    )
    parser.add_argument(
        "--hidden",
        type=int,
        default=DEEPSEEK_V3_HIDDEN,
        help="model width; 7168 gives DeepSeek V3's tensor shapes (default)",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="repeat and keep the best (default 1)"
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path(tempfile.gettempdir()),
        help="where the temporary checkpoint goes (default: the system temp folder)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.set_defaults(func=run_bench_extract)


def run_bench_extract(args: argparse.Namespace) -> int:
    result = run_extract_benchmark(
        args.dir,
        int(args.mtp_gb * 1e9),
        int(args.trunk_gb * 1e9),
        rounds=max(1, args.rounds),
        hidden=args.hidden,
        ctx=JobContext(emit=ProgressPrinter(sys.stderr)),
    )
    print(json.dumps(result.to_json()) if args.json else report_text(result))
    return 0


def _verdict(ok: bool) -> str:
    return "OK" if ok else "MISSED"


def _row(label: str, seconds: float, read: int, written: int, note: str = "") -> str:
    read_rate = f"{read / seconds / 1e9:.2f} GB/s" if read else ""
    write_rate = f"{written / seconds / 1e9:.2f} GB/s" if written else ""
    return f"{label:<26}{seconds:>7.2f} s {read_rate:>12} {write_rate:>12}  {note}".rstrip()


def report_text(result: ExtractBenchmark) -> str:
    rss = result.rss_above_baseline
    floor_note = (
        f"(read {result.floor_read_seconds:.2f} s + write {result.floor_write_seconds:.2f} s)"
    )
    return "\n".join(
        [
            f"checkpoint {format_bytes(result.checkpoint_bytes)}; MTP layer: "
            f"{result.tensor_count} tensors, {format_bytes(result.mtp_fp8_bytes)} FP8, "
            f"{format_bytes(result.bytes_needed)} to read, "
            f"{format_bytes(result.bytes_written)} BF16 sidecar",
            f"{'':<26}{'time':>9} {'read':>12} {'written':>12}",
            _row(
                "I/O floor",
                result.floor_seconds,
                result.bytes_needed,
                result.bytes_written,
                floor_note,
            ),
            _row("extraction", result.extract_seconds, result.bytes_read, result.bytes_written),
            _row(
                "SHA-256 of the output",
                result.hash_seconds,
                0,
                result.bytes_written,
                "(extraction does this while writing)",
            ),
            f"extraction / floor: {result.ratio:.2f}x (target <= {RATIO_TARGET:g}x) "
            f"{_verdict(result.ratio <= RATIO_TARGET)}",
            f"CPU time: floor {result.floor_cpu_seconds:.2f} s, extraction "
            f"{result.extract_cpu_seconds:.2f} s over {os.cpu_count()} cores "
            f"(load average {os.getloadavg()[0]:.1f}; wall times depend on free cores)",
            f"peak RSS: {format_bytes(result.extract_rss)}, interpreter baseline "
            f"{format_bytes(result.baseline_rss)}: +{format_bytes(rss)} "
            f"(target <= {format_bytes(RSS_TARGET_BYTES)}) {_verdict(rss <= RSS_TARGET_BYTES)}",
            f"bytes read / needed: {result.read_amplification:.3f} (target <= {READ_TARGET}) "
            f"{_verdict(result.read_amplification <= READ_TARGET)}",
        ]
    )
