"""Native against portable llama.cpp CPU code on this machine: ``bench decode`` on each, side by
side, so the choice set-up makes (native by default, portable as the fallback) has its price.

Both wheels come from set-up's wheel cache (``bash packaging/setup.sh`` builds the native one,
``bash packaging/setup.sh --portable`` or ``bash packaging/build.sh`` the portable one). Each is
unpacked into a temporary folder put first on PYTHONPATH, so the virtualenv's own build is left
alone. The runs alternate (native, portable, native, …) so that other load on the machine falls
on both alike; the script prints each run's tok/s per mode and the CPU seconds the whole run took
(the same prompts, seed and token budget: on a shared machine the steadier figure), then the
medians and portable ÷ native.

    python bench/bench_cpu_code.py [--rounds 3] [--max-tokens 128] [--depths 1,2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "resources" / "models" / "demo-mtp.gguf"
CPU_SECONDS = "CPU s (lower: faster)"


def cached_wheel(portable: bool) -> Path:
    """The wheel set-up cached for this machine's native build, or the portable one."""
    flags = '"$PORTABLE_FLAGS"' if portable else '""'
    folder = subprocess.run(
        ["bash", "-c", f"source packaging/build_plan.sh && wheel_cache_dir {flags}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    wheels = sorted(Path(folder).glob("llama_cpp_python-*.whl"))
    if not wheels:
        how = "bash packaging/setup.sh --portable" if portable else "bash packaging/setup.sh"
        raise SystemExit(f"bench_cpu_code: no wheel in {folder}; build it first: {how}")
    return wheels[-1]


def decode_speeds(site: Path, args: argparse.Namespace) -> dict[str, float]:
    """tok/s per mode of one ``bench decode`` run with the llama.cpp unpacked in ``site``, and
    under ``CPU s`` the CPU time of the run (the CLI and its inference worker)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    command = [sys.executable, "-m", "app", "bench", "decode", "--model", str(DEMO), "--json"]
    command += ["--depths", args.depths, "--repeats", "1", "--max-tokens", str(args.max_tokens)]
    command += ["--seed", "7", "--threads", str(args.threads)]
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}"}
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=3600
    )
    if done.returncode != 0:
        raise SystemExit(f"bench_cpu_code: bench decode failed:\n{done.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    result = json.loads(done.stdout)
    speeds = {mode["label"]: mode["decode_tokens_per_second"] for mode in result["modes"]}
    return {**speeds, CPU_SECONDS: cpu}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--depths", default="1,2")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    builds = {"native": cached_wheel(portable=False), "portable": cached_wheel(portable=True)}
    speeds: dict[str, list[dict[str, float]]] = {name: [] for name in builds}
    with tempfile.TemporaryDirectory() as work:
        sites = {}
        for name, wheel in builds.items():
            sites[name] = Path(work) / name
            unpack = ["install", "--quiet", "--no-deps", "--target", str(sites[name]), str(wheel)]
            subprocess.run([sys.executable, "-m", "pip", *unpack], check=True)
        for round_index in range(args.rounds):
            for name in builds:
                speeds[name].append(decode_speeds(sites[name], args))
                shown = "  ".join(f"{m} {v:.1f}" for m, v in speeds[name][-1].items())
                print(f"round {round_index + 1} {name:<9} tok/s: {shown}", flush=True)
    print(f"\nmedians over {args.rounds} rounds (demo model, {args.threads} threads): tok/s")
    print(f"{'mode':<22}{'native':>9}{'portable':>10}{'portable÷native':>17}")
    for mode in speeds["native"][0]:
        native = statistics.median(run[mode] for run in speeds["native"])
        portable = statistics.median(run[mode] for run in speeds["portable"])
        print(f"{mode:<22}{native:>9.1f}{portable:>10.1f}{portable / native:>16.2f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
