"""``mtp-studio bench serve``: several clients at once on ``serve`` beside llama-server, switching
between two models, and the memory two loaded models hold.

1. **Clients at once.** For each count in ``--clients`` (1,2,4), that many streamed requests start
   together (:mod:`~app.engine.runtime.bench.concurrent_clients`) on ``serve --model M
   --parallel N`` (N the largest count; plain: ``mtp_depth`` 0; MTP: the server's depth), on
   ``serve --parallel 1`` (one request at a time, the rest queued: what N sequences replace) and
   on llama-server ``--parallel N`` plain and with its MTP (``--spec-type draft-mtp``), same
   GGUF, same threads, one run after the other on this machine. Printed: aggregate tok/s, the
   mean per-client tok/s, TTFT mean and max; the median of ``--rounds`` rounds.
2. **Switching.** A library server with the two models (``--model`` and ``--second-model``): the
   first request to each (a cold load), then requests alternating between them with both loaded
   (``--max-loaded 2``) and with one at a time (``--max-loaded 1``: each switch unloads one and
   loads the other): TTFT per request.
3. **Memory.** Resident memory of the server and its workers with both models loaded, and after
   ``--idle-unload`` has unloaded them.

The llama-server binary is the one ``packaging/build_llama_server.sh`` caches; without it the
llama-server rows are left out (this command never starts a build). docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from app.commands.bench_serve_report import print_report
from app.commands.chat import stand_in
from app.engine.errors import RuntimeBackendError
from app.engine.runtime.bench.concurrent_clients import LoadRound, median_round, run_clients
from app.engine.runtime.bench.llama_server import LlamaServer
from app.engine.runtime.bench.serve_process import ServeProcess
from app.engine.runtime.core.cpu_threads import choose_threads
from app.engine.runtime.core.demo_model import DEMO_VISION_MODEL, demo_model_path

LLAMA_SERVER_CACHE = Path(".cache") / "mtp-studio" / "llama-server"
"""Where packaging/build_llama_server.sh keeps its build, under the home folder."""
SWITCHES = 4
IDLE_UNLOAD_SECONDS = 3
SLOT_CONTEXT = 4096


@dataclass(frozen=True)
class ConfigFigures:
    label: str
    rounds: tuple[LoadRound, ...]
    """One median round per client count."""


def register(benchmarks: argparse._SubParsersAction) -> None:
    parser = benchmarks.add_parser(
        "serve",
        help="several clients at once on serve beside llama-server; model switching; memory",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--model", type=Path, help="a .gguf model (default: the bundled demo)")
    parser.add_argument(
        "--second-model",
        type=Path,
        help="the other model of the switching test (default: the bundled vision demo)",
    )
    parser.add_argument("--clients", default="1,2,4", help="client counts (default 1,2,4)")
    parser.add_argument("--max-tokens", type=int, default=128, metavar="N")
    parser.add_argument("--rounds", type=int, default=2, metavar="N", help="median of N rounds")
    parser.add_argument("--llama-depth", type=int, default=3, metavar="K", help="llama-server MTP")
    parser.add_argument("--threads", type=int, default=0, metavar="N", help="both servers")
    parser.add_argument(
        "--llama-server", type=Path, help="its binary (default: the cached build, if any)"
    )
    parser.add_argument(
        "--wide",
        type=int,
        default=1,
        metavar="F",
        help="serve a memory-bound stand-in: every FFN widened F× with zero channels (same "
        "tokens, F× the FFN bytes), where a step of N rows costs less than N steps of one",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run, vocab=0)


def run(args: argparse.Namespace) -> int:
    with ExitStack() as stack:
        model = stand_in(args.model or demo_model_path(), args, stack, _progress)
        return _measure(args, model)


def _progress(message: str) -> None:
    print(f"… {message}", file=sys.stderr)


def _measure(args: argparse.Namespace, model: Path) -> int:
    second = args.second_model or DEMO_VISION_MODEL
    counts = _counts(args.clients)
    threads = choose_threads(args.threads).threads
    configs = _ours(model, counts, args, threads, max(counts))
    if max(counts) > 1:
        configs += _ours(model, counts, args, threads, 1)
    binary = args.llama_server or _cached_llama_server()
    if binary is not None:
        configs += _llama_servers(binary, model, counts, args, threads)
    switching, memory = _switching_and_memory(model, second, threads)
    report = {
        "model": str(model),
        "second_model": str(second),
        "threads": threads,
        "max_tokens": args.max_tokens,
        "rounds": args.rounds,
        "parallel": max(counts),
        "llama_server": str(binary) if binary else None,
        "configs": [_config_json(config) for config in configs],
        "switching": switching,
        "memory": memory,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 0


def _counts(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        counts = ()
    if not counts or min(counts) < 1:
        raise RuntimeBackendError(f"--clients {text!r}: give counts such as 1,2,4")
    return counts


def _rounds(
    url: str, model: str, counts: tuple[int, ...], args: argparse.Namespace, extra: dict[str, Any]
) -> tuple[LoadRound, ...]:
    run_clients(url, model, 1, 8, extra)  # warm-up: loads, first graphs
    medians = []
    for count in counts:
        rounds = [
            run_clients(url, model, count, args.max_tokens, extra) for _ in range(args.rounds)
        ]
        medians.append(median_round(rounds))
    return tuple(medians)


def _ours(
    model: Path, counts: tuple[int, ...], args: argparse.Namespace, threads: int, parallel: int
) -> list[ConfigFigures]:
    serve_args = ("--model", str(model), "--threads", str(threads), "--ctx", str(SLOT_CONTEXT))
    with ServeProcess(*serve_args, "--parallel", str(parallel)) as server:
        name = model.stem
        plain = _rounds(server.base_url, name, counts, args, {"mtp_depth": 0})
        drafting = _rounds(server.base_url, name, counts, args, {})
    return [
        ConfigFigures(f"serve --parallel {parallel} plain", plain),
        ConfigFigures(f"serve --parallel {parallel} MTP auto", drafting),
    ]


def _llama_servers(
    binary: Path, model: Path, counts: tuple[int, ...], args: argparse.Namespace, threads: int
) -> list[ConfigFigures]:
    parallel = max(counts)
    figures = []
    for depth in (0, args.llama_depth):
        server = LlamaServer(
            binary,
            model,
            depth=depth,
            threads=threads,
            context=SLOT_CONTEXT * parallel,
            parallel=parallel,
        )
        try:
            server.wait_ready()
            figures.append(
                ConfigFigures(server.label, _rounds(server.base_url, "m", counts, args, {}))
            )
        finally:
            server.close()
    return figures


def _switching_and_memory(
    model: Path, second: Path, threads: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as folder:
        root = Path(folder)
        models = root / "models"
        for source, name in ((model, "a"), (second, "b")):
            (models / name).mkdir(parents=True)
            shutil.copy2(source, models / name / source.name)
        ids = [f"a/{model.name}", f"b/{second.name}"]
        env = {"HF_HUB_CACHE": str(root / "hub"), "MTP_STUDIO_HOME": str(root / "home")}
        common = (
            "--models-dir",
            str(models),
            "--threads",
            str(threads),
            "--ctx",
            str(SLOT_CONTEXT),
        )
        both = ("--max-loaded", "2", "--idle-unload", f"{IDLE_UNLOAD_SECONDS}s")
        with ServeProcess(*common, *both, env=env) as server:
            cold = [_ttft(server, model_id) for model_id in ids]
            warm = _alternate(server, ids)
            held = server.resident_bytes()
            _wait_unloaded(server)
            after = server.resident_bytes()
        with ServeProcess(*common, "--max-loaded", "1", env=env) as server:
            _ttft(server, ids[0])
            swapping = _alternate(server, ids)
    switching = {
        "cold_load_ttft_seconds": cold,
        "switch_both_loaded_ttft_seconds": statistics.mean(warm),
        "switch_one_loaded_ttft_seconds": statistics.mean(swapping),
    }
    memory = {
        "two_loaded": {"server_bytes": held[0], "workers_bytes": held[1]},
        "after_idle_unload": {"server_bytes": after[0], "workers_bytes": after[1]},
    }
    return switching, memory


def _ttft(server: ServeProcess, model_id: str) -> float:
    return run_clients(server.base_url, model_id, 1, 8).runs[0].ttft_seconds


def _alternate(server: ServeProcess, ids: list[str]) -> list[float]:
    return [_ttft(server, ids[(i + 1) % 2]) for i in range(SWITCHES)]


def _wait_unloaded(server: ServeProcess) -> None:
    deadline = time.monotonic() + IDLE_UNLOAD_SECONDS + 30
    while time.monotonic() < deadline:
        if sum("(idle for" in line for line in server.lines) >= 2:
            time.sleep(0.5)  # the workers' exit
            return
        time.sleep(0.2)
    raise RuntimeBackendError("the idle models were not unloaded: " + "".join(server.lines[-5:]))


def _cached_llama_server() -> Path | None:
    """The binary build_llama_server.sh cached (None when it was never built: no build here)."""
    cache = os.environ.get("MTP_STUDIO_LLAMA_SERVER_CACHE") or Path.home() / LLAMA_SERVER_CACHE
    binary = Path(cache) / version("llama-cpp-python") / "bin" / "llama-server"
    if binary.is_file():
        return binary
    print(
        "bench serve: llama-server is not built (bash packaging/build_llama_server.sh builds "
        "it once): its rows are left out",
        file=sys.stderr,
    )
    return None


def _config_json(config: ConfigFigures) -> dict[str, Any]:
    return {
        "label": config.label,
        "rounds": [
            {
                "clients": r.clients,
                "aggregate_tokens_per_second": r.aggregate_tokens_per_second,
                "client_tokens_per_second": r.client_tokens_per_second,
                "mean_ttft_seconds": r.mean_ttft_seconds,
                "max_ttft_seconds": r.max_ttft_seconds,
                "tokens": sum(run.tokens for run in r.runs),
            }
            for r in config.rounds
        ],
    }
