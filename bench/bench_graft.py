"""Graft benchmark: ``python bench/bench_graft.py [--base-gb 1.0] [--rounds 6] [--dir DIR]``.

Part 1, speed and memory: builds a base GGUF of at least ``--base-gb`` GB in a temporary folder
(the demo trunk, Q8_0, plus one large padding tensor), then times, in the same run, a plain copy
of it (``shutil.copyfile``; also followed by ``fsync`` for scale, though the graft, like a copy,
leaves writeback to the OS) against ``mtp-studio graft`` of the demo sidecar into it, and prints
the ratio (target: graft ≤ 1.3× the copy); the three take turns in every position over the
rounds, each after an ``os.sync()``, and their medians are compared. Peak RSS comes from one more
graft in a child process, so it is the graft's own; a child that only imports the same modules
gives the interpreter's baseline. Everything is deleted afterwards.

Part 2, acceptance: the FP8 release's sidecar grafted into the demo trunk in Q8_0 and in Q4_0
(requantised by llama.cpp), against the shipped demo GGUF (converted by llama.cpp with its head),
on the same prompts: per-depth acceptance for draft depths K = 1, 2, 3 (greedy), side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import llama_cpp  # noqa: E402
import numpy as np  # noqa: E402
from gguf import GGUFReader, GGUFValueType, GGUFWriter  # noqa: E402

from app.engine.graft import graft_mtp  # noqa: E402
from app.engine.mtp import LocalFolderSource, extract_mtp  # noqa: E402
from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend  # noqa: E402
from app.engine.runtime.chat_format.prompting import ChatMessage  # noqa: E402
from app.engine.runtime.core.backend import LoadSettings  # noqa: E402
from app.engine.runtime.core.request import GenerationRequest  # noqa: E402
from app.engine.runtime.speculative.generation import generate  # noqa: E402
from tests.graft.bases import (  # noqa: E402
    DEMO_FP8,
    DEMO_GGUF,
    requantise,
    write_trunk_only,
)

PADDING_CHUNK = 64 * 1024 * 1024
PEAK_RSS = """
def peak_rss():
    # VmHWM is this process's own high-water mark; ru_maxrss would also count the memory of the
    # process that forked it (the benchmark, which has just written the large base).
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
"""
CHILD_GRAFT = (
    PEAK_RSS
    + """
import json, sys, time
from pathlib import Path
from app.engine.graft import graft_mtp
started = time.perf_counter()
graft_mtp(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
seconds = time.perf_counter() - started
print(json.dumps({"seconds": seconds, "peak_rss": peak_rss()}))
"""
)
CHILD_BASELINE = (
    PEAK_RSS
    + """
import json
import app.engine.graft
print(json.dumps({"seconds": 0.0, "peak_rss": peak_rss()}))
"""
)
PROMPTS = (
    GenerationRequest(messages=(ChatMessage("user", "Return the number of lines in a file."),)),
    GenerationRequest(messages=(ChatMessage("user", "Merge two sorted lists into one."),)),
    GenerationRequest(prompt="import os\n\n\ndef walk(top):\n"),
    GenerationRequest(prompt="class Queue:\n    def __init__(self"),
    GenerationRequest(prompt="def fibonacci(n):\n    return"),
    GenerationRequest(messages=(ChatMessage("user", "Write a function that reverses a string."),)),
)


def build_large_base(trunk: Path, out: Path, size_bytes: int) -> Path:
    """The trunk's tensors plus an I8 padding tensor so the file is at least ``size_bytes``,
    written in chunks (gguf-py's writer, tensor data streamed from a memory map)."""
    reader = GGUFReader(trunk)
    padding_bytes = -(-(size_bytes - trunk.stat().st_size) // PADDING_CHUNK) * PADDING_CHUNK
    scratch = out.with_suffix(".padding")
    with open(scratch, "wb") as handle:
        rng = np.random.default_rng(0)
        for _ in range(padding_bytes // PADDING_CHUNK):
            handle.write(rng.integers(-128, 128, PADDING_CHUNK, dtype=np.int8).tobytes())
    padding = np.memmap(scratch, dtype=np.int8, mode="r")
    writer = GGUFWriter(out, "qwen35")
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        kind = field.types[0]
        sub_type = field.types[-1] if kind == GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), kind, sub_type=sub_type)
    for tensor in reader.tensors:
        writer.add_tensor(tensor.name, np.asarray(tensor.data), raw_dtype=tensor.tensor_type)
    writer.add_tensor("bench.padding", padding)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    del padding
    scratch.unlink()
    return out


def timed_copy(source: Path, target: Path, sync: bool) -> float:
    target.unlink(missing_ok=True)
    started = time.perf_counter()
    shutil.copyfile(source, target)
    if sync:
        with open(target, "rb+") as handle:
            os.fsync(handle.fileno())
    seconds = time.perf_counter() - started
    target.unlink()
    return seconds


def child(script: str, *args: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", script, *args], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def speed(work: Path, trunk: Path, sidecar: Path, base_gb: float, rounds: int) -> None:
    base = build_large_base(trunk, work / "large-base.gguf", int(base_gb * 1e9))
    out = work / "large-grafted.gguf"
    size = base.stat().st_size
    timed_copy(base, work / "warm.gguf", sync=False)  # page-cache the base for every contender

    def graft_once() -> float:
        started = time.perf_counter()
        graft_mtp(base, sidecar, out)
        seconds = time.perf_counter() - started
        out.unlink()
        return seconds

    contenders = {
        "plain copy": lambda: timed_copy(base, work / "copy.gguf", sync=False),
        "copy + fsync": lambda: timed_copy(base, work / "copy.gguf", sync=True),
        "graft": graft_once,
    }
    times: dict[str, list[float]] = {name: [] for name in contenders}
    order = list(contenders)
    for round_index in range(rounds):
        # each contender takes each position in turn, and starts with no dirty pages pending:
        # on a shared machine the one that follows a big write is otherwise penalised
        rotation = order[round_index % 3 :] + order[: round_index % 3]
        for name in rotation:
            os.sync()
            times[name].append(contenders[name]())
    copy, copy_sync, graft = (statistics.median(times[name]) for name in order)
    peak = child(CHILD_GRAFT, str(base), str(sidecar), str(out))["peak_rss"]
    out.unlink()
    baseline = child(CHILD_BASELINE)["peak_rss"]
    print(f"base: {size / 1e9:.2f} GB ({size} B), {rounds} rounds; ratios of the medians")
    header = f"{'':16}{'median s':>10}{'best s':>9}{'GB/s':>7}{'× copy':>8}{'× copy+fsync':>14}"
    print(header)
    for name, seconds in zip(order, (copy, copy_sync, graft), strict=True):
        print(
            f"{name:16}{seconds:10.3f}{min(times[name]):9.3f}{size / seconds / 1e9:7.2f}"
            f"{seconds / copy:8.2f}{seconds / copy_sync:14.2f}"
        )
    verdict = "meets" if graft <= 1.3 * copy else "misses"
    print(f"graft / plain copy = {graft / copy:.2f} ({verdict} the ≤ 1.3× target)")
    print(
        f"graft peak RSS: {peak / 1e6:.1f} MB; interpreter + imports alone: {baseline / 1e6:.1f} "
        f"MB; graft's own: {(peak - baseline) / 1e6:.1f} MB (base {size / 1e9:.2f} GB)"
    )


def acceptance(work: Path, trunk_q8: Path, sidecar: Path) -> None:
    trunk_q4 = requantise(trunk_q8, work / "trunk-q4_0.gguf", llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0)
    models = {"shipped demo (Q8_0, converter)": DEMO_GGUF}
    for label, base in (("grafted Q8_0 trunk", trunk_q8), ("grafted Q4_0 trunk", trunk_q4)):
        models[label] = graft_mtp(base, sidecar, work / f"{label.split()[1]}.gguf").out_path
    print(f"\nacceptance at temperature 0, {len(PROMPTS)} prompts × 64 tokens, same prompts")
    print("per-depth acceptance (accepted / drafted at depth i) for draft depths K = 1, 2, 3")
    print(f"{'model':34}{'K=1':>8}{'K=2':>16}{'K=3':>24}")
    for label, path in models.items():
        backend = LlamaCppBackend(path, LoadSettings(threads=1, context_length=1024))
        columns = []
        for depth in (1, 2, 3):
            drafted = np.zeros(depth, dtype=np.int64)
            accepted = np.zeros(depth, dtype=np.int64)
            for prompt in PROMPTS:
                request = GenerationRequest(
                    messages=prompt.messages, prompt=prompt.prompt, max_tokens=64, mtp_depth=depth
                )
                stats = generate(backend, request, emit=lambda _c: None, cancelled=lambda: False)
                drafted += np.array(stats.stats.drafted_by_depth)
                accepted += np.array(stats.stats.accepted_by_depth)
            rates = " ".join(f"{a / d:.3f}" for a, d in zip(accepted, drafted, strict=True))
            columns.append(f"{rates:>{8 * depth}}")
        backend.close()
        print(f"{label:34}" + "".join(columns))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-gb", type=float, default=1.0, help="base size (default 1.0 GB)")
    parser.add_argument("--rounds", type=int, default=6, help="timed rounds (default 6)")
    parser.add_argument("--dir", type=Path, default=None, help="where to build the temp files")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-graft-", dir=args.dir) as folder:
        work = Path(folder)
        trunk = write_trunk_only(DEMO_GGUF, work / "trunk-q8_0.gguf")
        sidecar = work / "mtp.safetensors"
        extract_mtp(LocalFolderSource(DEMO_FP8), sidecar)
        speed(work, trunk, sidecar, args.base_gb, args.rounds)
        acceptance(work, trunk, sidecar)
    return 0


if __name__ == "__main__":
    sys.exit(main())
