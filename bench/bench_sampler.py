"""The sampler's cost per token at real vocabulary sizes: ``python bench/bench_sampler.py
[--vocab 152064,262144] [--before FILE]``.

One sampled token (:func:`app.engine.runtime.sampling.sampler.sample`) on rows as wide as a real
vocabulary, for the chat's settings (T 0.6, top-k 20, top-p 0.95), top-k 40, temperature alone and
top-p alone (an API request without top-k), on two kinds of row: the vocabulary stand-in's (a
model's 4,096 logits, then unused slots all at 0: ``--vocab`` of ``bench decode`` and
``bench_host_loop.py``) and a spread row (every token a different logit, a few strong ones). CPU
time of this thread per token, the best of 3 passes over 16 rows.

``--before FILE`` loads another version of ``sampling/candidates.py`` (say, ``main``'s, from
``git show main:app/engine/runtime/sampling/candidates.py``) and runs each case with it and with
this one, alternately in one run, so the two are compared under the same load. The end-to-end
cost per token (the sampler inside the decoding loop, chunks, statistics) is
``bench_host_loop.py``'s.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from app.engine.runtime.sampling import sampler
from app.engine.runtime.sampling.sampler import SamplerSettings

SETTINGS = {
    "T 0.6, top-k 20, top-p 0.95": SamplerSettings(temperature=0.6, top_k=20, top_p=0.95),
    "T 1, top-k 40": SamplerSettings(temperature=1.0, top_k=40),
    "T 0.6 alone": SamplerSettings(temperature=0.6),
    "T 0.6, top-p 0.95": SamplerSettings(temperature=0.6, top_p=0.95),
}
_ROWS, _PASSES = 16, 3


def _rows(vocab: int, kind: str, rng: np.random.Generator) -> np.ndarray:
    if kind == "stand-in":
        rows = np.zeros((_ROWS, vocab), dtype=np.float32)
        rows[:, :4096] = rng.normal(size=(_ROWS, 4096)) * 2.5 + 3.0
        return rows
    rows = (rng.normal(size=(_ROWS, vocab)) * 1.5).astype(np.float32)
    rows[:, rng.integers(0, vocab, size=30)] += 9.0
    return rows


def _microseconds(rows: np.ndarray, settings: SamplerSettings) -> float:
    rng = np.random.default_rng(1)
    for row in rows[:2]:
        sampler.sample(row, settings, rng)
    best = float("inf")
    for _ in range(_PASSES):
        started = time.thread_time()
        for row in rows:
            sampler.sample(row, settings, rng)
        best = min(best, (time.thread_time() - started) / len(rows))
    return best * 1e6


def _use(module: object) -> None:
    """Sample with ``module``'s top-k and top-p selection."""
    sampler.top_k_ids = module.top_k_ids
    sampler.top_p_ids = module.top_p_ids


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab", default="152064,262144", metavar="V,V")
    parser.add_argument("--before", type=Path, default=None, metavar="FILE")
    args = parser.parse_args()
    current = sys.modules[sampler.top_k_ids.__module__]
    versions = {"this": current}
    if args.before is not None:
        spec = importlib.util.spec_from_file_location("candidates_before", args.before)
        before = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(before)
        versions = {"before": _accepting_peak(before), **versions}
    print("µs of CPU per sampled token · " + " / ".join(versions))
    rng = np.random.default_rng(0)
    for vocab in (int(v) for v in args.vocab.split(",")):
        for kind in ("stand-in", "spread"):
            rows = _rows(vocab, kind, rng)
            for label, settings in SETTINGS.items():
                figures = []
                for module in versions.values():
                    _use(module)
                    figures.append(_microseconds(rows, settings))
                ratio = f"  ({figures[0] / figures[-1]:.1f}×)" if len(figures) > 1 else ""
                cells = " / ".join(f"{f:7.1f}" for f in figures)
                print(f"{vocab:>8} {kind:<9} {label:<28} {cells}{ratio}")
    _use(current)
    return 0


def _accepting_peak(module: object) -> object:
    """``module`` as the sampler calls it: an older ``top_p_ids`` without the ``peak`` argument
    (the largest weight when the caller knows it) is called without it."""
    if "peak" in inspect.signature(module.top_p_ids).parameters:
        return module

    class Adapted:
        top_k_ids = staticmethod(module.top_k_ids)

        @staticmethod
        def top_p_ids(weights: np.ndarray, mass: float, peak: float | None = None) -> np.ndarray:
            return module.top_p_ids(weights, mass)

    return Adapted


if __name__ == "__main__":
    sys.exit(main())
