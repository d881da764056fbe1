"""Host loop profile: ``python bench/bench_host_loop.py [--model PATH] [--vocab V] [--profile]``.

What the loop around llama.cpp costs per token — sampling, acceptance, detokenising, stop rules,
kept-state bookkeeping, statistics, chunks sent to the front end — measured end to end through
the inference worker's own request handling. The worker runs in this process (so it can be
profiled); its chunks cross a real pipe to a second process that reads them, as a front end does.

For plain decoding and MTP (Leviathan–Chen, K=2), greedy and sampled (T 0.6, top-k 20, top-p
0.95), it prints per generated token: the decode time, the time inside ``llama_decode`` (the
model) and the rest (the host) — in wall time, and the host's in CPU time of the decoding thread
(with one llama.cpp thread, the model runs on that thread too), which time other processes take
from the core does not inflate: on a shared machine that is the figure to compare. ``--vocab V``
runs on the vocabulary stand-in (the model with its
vocabulary padded to V tokens, :mod:`app.engine.runtime.bench.wide_model`), so the per-token
costs that grow with the vocabulary show. ``--profile`` adds each mode's top functions by own
time, ``llama_decode`` left out.

The time inside ``llama_decode`` is taken by wrapping the ctypes function itself, so the script
measures any version of the loop the same way (it ran against the loop before and after issue 37).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import multiprocessing
import pstats
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import llama_cpp

from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.bench.decode_bench import PROMPTS
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.demo_model import demo_model_path
from app.engine.runtime.core.request import GenerationRequest
from app.engine.runtime.process.messages import GenerationFinished, LoadModel, StartGeneration
from app.engine.runtime.process.worker import _Worker
from app.engine.runtime.sampling.acceptance import AcceptMode
from app.engine.runtime.sampling.sampler import SamplerSettings

_native = {"seconds": 0.0, "cpu": 0.0}
_decode = llama_cpp.llama_decode


def _timed_decode(context, batch):
    started, cpu_started = time.perf_counter(), time.thread_time()
    try:
        return _decode(context, batch)
    finally:
        _native["seconds"] += time.perf_counter() - started
        _native["cpu"] += time.thread_time() - cpu_started


llama_cpp.llama_decode = _timed_decode


def _front_end(connection, results) -> None:
    """Read every message as a front end would; pass each reply's stats back."""
    try:
        while True:
            message = connection.recv()
            if isinstance(message, GenerationFinished):
                results.send(message.result.stats)
    except EOFError:
        pass


@dataclass(frozen=True)
class Mode:
    label: str
    depth: int
    temperature: float

    def request(self, prompt: str, tokens: int, seed: int) -> GenerationRequest:
        sampler = SamplerSettings(temperature=self.temperature, top_k=20, top_p=0.95, seed=seed)
        return GenerationRequest(
            messages=(ChatMessage("user", prompt),),
            max_tokens=tokens,
            sampler=sampler,
            mtp_depth=self.depth,
            accept=AcceptMode.LEVIATHAN_CHEN,
        )


MODES = (
    Mode("plain greedy", 0, 0.0),
    Mode("plain T0.6", 0, 0.6),
    Mode("MTP K=2 greedy", 2, 0.0),
    Mode("MTP K=2 T0.6", 2, 0.6),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--vocab", type=int, default=0, metavar="V")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=128, metavar="N", help="per request")
    parser.add_argument("--rounds", type=int, default=3, help="passes over the prompts")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()

    model = args.model or demo_model_path()
    with tempfile.TemporaryDirectory(prefix="mtp-host-loop-") as folder:
        if args.vocab:
            from app.engine.runtime.bench.wide_model import widened_copy

            model = widened_copy(model, 1, Path(folder), vocab=args.vocab)
        run(model, args)
    return 0


def run(model: Path, args: argparse.Namespace) -> None:
    context = multiprocessing.get_context("spawn")
    worker_end, front_end = context.Pipe(duplex=True)
    results_in, results_out = context.Pipe(duplex=False)
    reader = context.Process(target=_front_end, args=(front_end, results_out), daemon=True)
    reader.start()
    worker = _Worker(worker_end)
    settings = LoadSettings(threads=args.threads, context_length=2048)
    worker._handle(LoadModel("llama.cpp", model, settings))
    backend = worker._backend
    assert isinstance(backend, LlamaCppBackend)
    at_prefill = {"seconds": 0.0, "cpu": 0.0, "thread": 0.0}
    prefill = backend.prefill

    def marked_prefill(*a, **k):
        logits = prefill(*a, **k)
        at_prefill.update(_native, thread=time.thread_time())
        return logits

    backend.prefill = marked_prefill  # type: ignore[method-assign]
    print(
        f"model {model.name} · vocabulary {backend.info.vocab_size} · threads {args.threads} · "
        f"{args.tokens} tokens per request, {args.rounds} × {len(PROMPTS)} prompts per mode"
    )
    print(
        f"{'mode':<16}{'tokens':>8}{'tok/s':>9}{'decode ms':>11}{'model ms':>10}{'host ms':>9}"
        f"{'host CPU ms':>13}"
    )
    request_id = 0
    profiles = {}
    for mode in MODES:
        profile = cProfile.Profile(time.thread_time) if args.profile else None
        tokens = decode_seconds = model_seconds = host_cpu = profiled_tokens = 0.0
        # the first round warms up; a last one is profiled (cProfile slows what it watches)
        for round_index in range(args.rounds + 1 + (profile is not None)):
            profiled = profile is not None and round_index > args.rounds
            for index, prompt in enumerate(PROMPTS):
                request_id += 1
                request = mode.request(prompt, args.tokens, seed=1000 * round_index + index)
                _native.update(seconds=0.0, cpu=0.0)
                if profiled:
                    profile.enable()
                worker._handle(StartGeneration(request_id, request))
                if profiled:
                    profile.disable()
                thread_cpu = time.thread_time() - at_prefill["thread"]
                native = _native["seconds"] - at_prefill["seconds"]
                native_cpu = _native["cpu"] - at_prefill["cpu"]
                stats = results_in.recv()
                if profiled:
                    profiled_tokens += stats.generated_tokens
                elif round_index:
                    tokens += stats.generated_tokens
                    decode_seconds += stats.decode_seconds
                    model_seconds += native
                    host_cpu += thread_cpu - native_cpu
        host = (decode_seconds - model_seconds) / tokens
        print(
            f"{mode.label:<16}{int(tokens):>8}{tokens / decode_seconds:>9.1f}"
            f"{decode_seconds / tokens * 1000:>11.3f}{model_seconds / tokens * 1000:>10.3f}"
            f"{host * 1000:>9.3f}{host_cpu / tokens * 1000:>13.3f}"
        )
        profiles[mode.label] = (profile, profiled_tokens)
    if args.profile:
        for label, (profile, tokens) in profiles.items():
            print(f"\n{label}: top functions by own CPU time (µs per generated token)")
            print(_top(profile, tokens))
    worker_end.close()
    reader.join(5)


def _top(profile: cProfile.Profile, tokens: float, count: int = 14) -> str:
    stats = pstats.Stats(profile, stream=io.StringIO())
    rows = []
    for (file, line, name), (_calls, calls, own, _cumulative, _callers) in stats.stats.items():
        if name == "_timed_decode" or "llama_decode" in name:
            continue
        where = f"{Path(file).name}:{line}({name})" if line else name
        rows.append((own, calls, where))
    rows.sort(reverse=True)
    return "\n".join(
        f"  {own / tokens * 1e6:8.1f} µs  {calls / tokens:6.2f} calls/token  {where}"
        for own, calls, where in rows[:count]
    )


if __name__ == "__main__":
    sys.exit(main())
