"""CLI start-up: how long `mtp-studio --help` and a tiny `extract` take, against a 0.3 s target.
``python bench/bench_startup.py [--runs 7]``.

Every subcommand used to import every command module (numpy, the Hub client, llama.cpp's
bindings) before parsing its arguments; now only the chosen one is imported. The script times the
whole process (start to exit) for ``--help``, ``--version`` and extracting the demo FP8 checkpoint's
head (0.01 s of actual work), and prints the median and best of ``--runs`` runs beside the target.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 0.3


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    cli = [sys.executable, "-m", "app"]
    with tempfile.TemporaryDirectory() as scratch:
        extract = [
            *cli,
            "extract",
            "--source",
            str(ROOT / "resources" / "models" / "demo-mtp-fp8"),
            "--out",
            str(Path(scratch) / "mtp.safetensors"),
        ]
        rows = [
            ("python -c pass (floor)", [sys.executable, "-c", "pass"]),
            ("mtp-studio --help", [*cli, "--help"]),
            ("mtp-studio --version", [*cli, "--version"]),
            ("mtp-studio extract (demo)", extract),
        ]
        print(f"{'command':28} {'median s':>9} {'best s':>8}   target ≤ {TARGET_SECONDS} s")
        for name, command in rows:
            times = [timed(command) for _ in range(args.runs)]
            median = statistics.median(times)
            verdict = "" if "floor" in name else ("ok" if median <= TARGET_SECONDS else "MISSED")
            print(f"{name:28} {median:9.3f} {min(times):8.3f}   {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
