"""The double-click bundle's figures: build time, size, and how fast it starts, beside the
virtualenv install's start in the same run.
``python bench/bench_bundle.py [--bundle dist/mtp-studio/mtp-studio] [--runs 3] [--build]``.

Start-up is measured twice: ``--version`` (process start to exit: the CLI's fixed cost) and the
window (process start to the "main window shown" line the app logs on its first event-loop turn,
offscreen, on a fresh settings folder each run). ``--build`` times ``packaging/build.sh`` first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.ui.logsetup import LOG_FILE_NAME  # noqa: E402
from app.ui.main import WINDOW_SHOWN  # noqa: E402


def folder_bytes(folder: Path) -> int:
    files = [file for file in folder.rglob("*") if file.is_file() and not file.is_symlink()]
    return sum(file.stat().st_size for file in files)


def time_version(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run([*command, "--version"], check=True, capture_output=True)
    return time.perf_counter() - started


def time_window(command: list[str], timeout: float = 120.0) -> float:
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "MTP_STUDIO_HOME": home, "QT_QPA_PLATFORM": "offscreen"}
        log_file = Path(home) / "logs" / LOG_FILE_NAME
        started = time.perf_counter()
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            while time.perf_counter() - started < timeout:
                if log_file.is_file() and WINDOW_SHOWN in log_file.read_text(errors="replace"):
                    return time.perf_counter() - started
                if process.poll() is not None:
                    raise SystemExit(
                        f"{command[0]} exited ({process.returncode}) before its window"
                    )
                time.sleep(0.01)
            raise SystemExit(f"{command[0]} showed no window in {timeout:.0f} s")
        finally:
            process.terminate()
            process.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, default=ROOT / "dist" / "mtp-studio" / "mtp-studio")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--build", action="store_true", help="time packaging/build.sh first")
    args = parser.parse_args()
    if args.build:
        started = time.perf_counter()
        subprocess.run(["bash", "packaging/build.sh"], cwd=ROOT, check=True, capture_output=True)
        print(f"build time: {time.perf_counter() - started:.1f} s")
    if not args.bundle.is_file():
        raise SystemExit(f"no bundle at {args.bundle}: run bash packaging/build.sh (or --build)")
    folder = args.bundle.parent
    tarballs = sorted(folder.parent.glob("mtp-studio-*.tar.gz"))
    print(f"bundle: {folder} — {folder_bytes(folder) / 1e6:.0f} MB unpacked", end="")
    print(
        f", {tarballs[-1].stat().st_size / 1e6:.0f} MB as {tarballs[-1].name}" if tarballs else ""
    )
    rows = [("bundle", [str(args.bundle)]), ("venv", [sys.executable, "-m", "app"])]
    print(f"{'':8} {'--version (s)':>14} {'window shown (s)':>17}   (median of {args.runs})")
    for name, command in rows:
        version = statistics.median(time_version(command) for _ in range(args.runs))
        window = statistics.median(time_window(command) for _ in range(args.runs))
        print(f"{name:8} {version:14.2f} {window:17.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
