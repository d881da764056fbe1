"""``mtp-studio bench …``: benchmarks that print measured figures and ratios side by side.

Each benchmark is its own module with ``register(bench_subparsers)``, listed in
:data:`BENCH_MODULES` (e.g. ``bench_extract`` for ``bench extract``); add ``bench decode`` or
``bench publish`` by adding a module and its name here.
"""

from __future__ import annotations

import argparse
import importlib

BENCH_MODULES: tuple[str, ...] = ("bench_extract", "bench_decode", "bench_chat", "bench_serve")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="run a benchmark and print its figures",
        description="Measure speed and memory against the project's targets.",
    )
    benchmarks = parser.add_subparsers(dest="bench_command", metavar="BENCHMARK", required=True)
    for module_name in BENCH_MODULES:
        importlib.import_module(f"app.commands.{module_name}").register(benchmarks)
