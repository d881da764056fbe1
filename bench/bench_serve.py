"""Load on ``mtp-studio serve``: N concurrent clients for a while against the demo model.

``python bench/bench_serve.py [--clients 8] [--seconds 60] [--max-tokens 32] [--mtp-depth auto|K]
[--model PATH]``

Starts ``serve`` in another process (as a user would), then each client sends chat requests back
to back with the ``openai`` client (whole replies, temperature 0.7, a different prompt each time)
until the time is up. Prints requests/s, latency p50/p99, errors, generated tokens/s and the MTP
acceptance and drafts per cycle the server reports (``serve``'s default depth, auto, unless
``--mtp-depth`` says otherwise), and the resident memory (RSS) of the server process and of its
inference worker at the start and at the end of the run, side by side.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from openai import OpenAI  # noqa: E402

from app.commands.chat import depth_argument  # noqa: E402
from app.engine.runtime.speculative.depth_policy import DEFAULT_MTP_DEPTH  # noqa: E402
from tests.server.server_process import running_server  # noqa: E402

PROMPTS = (
    "Write a short poem about the sea.",
    "Explain what a hash map is.",
    "def fibonacci(n):",
    "List three uses of Python.",
    "Tell me about the number {n}.",
)


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    completion_tokens: int = 0
    drafted: int = 0
    accepted: int = 0
    cycles: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def worker_pid(server_pid: int) -> int:
    """The inference worker: the server's ``spawn``-ed child (not multiprocessing's tracker)."""
    for task in Path(f"/proc/{server_pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                return int(child)
    raise RuntimeError(f"serve (pid {server_pid}) has no inference worker process")


def client_loop(
    base_url: str, client_index: int, until: float, tally: Tally, max_tokens: int
) -> None:
    client = OpenAI(base_url=base_url, api_key="bench", max_retries=0, timeout=120)
    count = 0
    while time.monotonic() < until:
        prompt = PROMPTS[count % len(PROMPTS)].format(n=client_index * 1000 + count)
        count += 1
        started = time.monotonic()
        try:
            reply = client.chat.completions.create(
                model="demo-mtp",
                messages=[{"role": "user", "content": prompt}],
                max_tokens=max_tokens,
                temperature=0.7,
            )
        except Exception as exc:  # every failure is a figure of the run
            with tally.lock:
                tally.errors.append(f"{type(exc).__name__}: {exc}")
            continue
        latency = time.monotonic() - started
        mtp = reply.model_extra["mtp"]
        with tally.lock:
            tally.latencies.append(latency)
            tally.completion_tokens += reply.usage.completion_tokens
            tally.drafted += sum(mtp["drafted_by_depth"])
            tally.accepted += sum(mtp["accepted_by_depth"])
            tally.cycles += mtp["cycles"]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--mtp-depth", type=depth_argument, default=DEFAULT_MTP_DEPTH)
    parser.add_argument("--model", type=Path)
    args = parser.parse_args()
    serve_args = ["--mtp-depth", str(args.mtp_depth), "--queue-size", str(args.clients)]
    if args.model is not None:
        serve_args += ["--model", str(args.model)]
    with running_server(*serve_args) as server:
        server_pid = server.process.pid
        worker = worker_pid(server_pid)
        rss_start = rss_mib(server_pid), rss_mib(worker)
        tally = Tally()
        started = time.monotonic()
        until = started + args.seconds
        threads = [
            threading.Thread(
                target=client_loop, args=(server.base_url, i, until, tally, args.max_tokens)
            )
            for i in range(args.clients)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.monotonic() - started
        rss_end = rss_mib(server_pid), rss_mib(worker)

    done = len(tally.latencies)
    print(
        f"serve load: {args.clients} clients × {args.seconds:.0f} s, demo model, "
        f"max_tokens {args.max_tokens}, MTP depth {args.mtp_depth} (wall {wall:.1f} s)"
    )
    print(f"  requests completed   {done}  ({done / wall:.2f} requests/s)")
    if done:
        print(
            f"  latency              p50 {percentile(tally.latencies, 0.5) * 1000:.0f} ms · "
            f"p99 {percentile(tally.latencies, 0.99) * 1000:.0f} ms · "
            f"max {max(tally.latencies) * 1000:.0f} ms · mean "
            f"{statistics.mean(tally.latencies) * 1000:.0f} ms"
        )
        acceptance = tally.accepted / tally.drafted if tally.drafted else 0.0
        drafts_per_cycle = tally.drafted / tally.cycles if tally.cycles else 0.0
        print(
            f"  generated tokens     {tally.completion_tokens} "
            f"({tally.completion_tokens / wall:.1f} tok/s served) · drafts accepted "
            f"{tally.accepted}/{tally.drafted} ({acceptance:.0%}) · "
            f"{drafts_per_cycle:.2f} drafts/cycle over {tally.cycles} cycles"
        )
    print(f"  errors               {len(tally.errors)}")
    for error in sorted(set(tally.errors))[:5]:
        print(f"    {error}")
    print(f"  RSS (MiB)            {'start':>8} {'end':>8}")
    print(f"    server process     {rss_start[0]:8.1f} {rss_end[0]:8.1f}")
    print(f"    inference worker   {rss_start[1]:8.1f} {rss_end[1]:8.1f}")
    return 1 if tally.errors else 0


if __name__ == "__main__":
    sys.exit(main())
