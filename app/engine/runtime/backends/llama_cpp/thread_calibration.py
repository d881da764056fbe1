"""The default step thread count, measured: llama.cpp's default, or fewer threads where fewer
are faster.

Why: llama.cpp's tools use every physical performance core (:func:`choose_threads`), which is
right where a decoding step is long enough to be worth sharing out. On a small model (the demo,
a drafter-sized model) a step takes under a millisecond and the threads' barriers cost more than
the extra cores give: on a quiet 2-core EPYC the demo decodes plain 1.2x faster on 1 thread than
on 2, and llama-server 1.07x. On a busy machine, llama.cpp's threads also wait for cores that
other programs hold. So with no thread count asked for, a model that computes on the CPU is
timed at load on a throwaway context: llama.cpp's default first, then half as many threads, and
so on down to one, on one-row steps (a plain token, an MTP draft), in blocks whose order
alternates between rounds so a moment of load falls on every count alike (an MTP cycle, a draft
step and a verify batch of a few rows, ranked the counts as a plain step did in the same runs).
A count under the default is taken only when it is :data:`MARGIN` faster; prompts (batches)
keep every physical core either way. Measured with a one-core busy loop beside it, the demo
chose 1 thread and decoded at 759 tok/s where 2 threads (llama.cpp's default) gave 71–88.

A model file is timed once per process (the server and the tests load the same file again and
again); the inference worker is a fresh process for each model a user loads, so a choice made
on a busy machine does not outlive that model's session.

Measuring stops at the default when its quickest step takes :data:`LONG_STEP_SECONDS` or more:
such a step is bound by memory bandwidth, more cores never lose there, and each further step
would add load time. A model offloaded to a GPU is not measured (the GPU computes; the threads
wait).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import llama_cpp
import numpy as np

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.backends.llama_cpp import log as llama_cpp_log
from app.engine.runtime.backends.llama_cpp.threadpool import ThreadPools
from app.engine.runtime.core.cpu_threads import ThreadChoice

LONG_STEP_SECONDS = 0.02
"""A step of the default count this long or longer: keep the default without measuring more."""
MARGIN = 0.05
"""A smaller count must be this much faster (a share of the default's time) to be taken."""
ROUNDS = 3
"""Blocks per count, the counts' order reversed from one round to the next."""
STEPS_PER_BLOCK = 5
"""Timed steps per block, after one that warms the block's fresh thread pool."""
_CONTEXT_SIZE = 64
_chosen: dict[tuple[str, int, int, ThreadChoice], ThreadChoice] = {}


@dataclass(frozen=True)
class ThreadTiming:
    """The median seconds of a one-row step at ``threads``."""

    threads: int
    seconds: float


def candidate_counts(default: int) -> tuple[int, ...]:
    """The default, then halved down to one: 8 → (8, 4, 2, 1)."""
    counts = [default]
    while counts[-1] > 1:
        counts.append(counts[-1] // 2)
    return tuple(counts)


def fastest(timings: tuple[ThreadTiming, ...]) -> ThreadTiming:
    """The default (the first timing) unless a count is :data:`MARGIN` faster than it; of those,
    the fastest."""
    default = timings[0]
    faster = [t for t in timings[1:] if t.seconds <= default.seconds * (1 - MARGIN)]
    return min(faster, key=lambda timing: timing.seconds) if faster else default


def measured_choice(default: ThreadChoice, timings: tuple[ThreadTiming, ...]) -> ThreadChoice:
    """``default`` with the step count the timings favour, and the reason saying so."""
    best = fastest(timings)
    figures = ", ".join(
        f"{t.threads} thread{'s' if t.threads > 1 else ''} {t.seconds * 1000:.2f} ms"
        for t in timings
    )
    if len(timings) == 1:
        reason = (
            f"{default.reason}; a step takes {timings[0].seconds * 1000:.0f} ms, "
            "long enough for every core"
        )
    elif best is timings[0]:
        reason = f"{default.reason}; fewer were not faster: {figures}"
    else:
        reason = f"timed faster than {default.threads} here: {figures}"
    return ThreadChoice(best.threads, default.batch_threads, reason)


def calibrated(path: Path, model: llama_cpp.llama_model_p, default: ThreadChoice) -> ThreadChoice:
    """The step threads for ``model`` (loaded from ``path``, on the CPU) measured against
    ``default``, once per process for a file as it is on disk."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, default)
    if key not in _chosen:
        _chosen[key] = calibrate(model, default)
    return _chosen[key]


def calibrate(model: llama_cpp.llama_model_p, default: ThreadChoice) -> ThreadChoice:
    """The step threads for ``model`` (loaded, on the CPU), measured against ``default``."""
    counts = candidate_counts(default.threads)
    if len(counts) == 1:
        return default
    with _ScratchContext(model) as scratch:
        samples: dict[int, list[float]] = {n: [] for n in counts}
        first = scratch.time_block(counts[0], samples[counts[0]])
        if first >= LONG_STEP_SECONDS:
            timings = (_timing(counts[0], samples[counts[0]]),)
            return measured_choice(default, timings)
        for round_index in range(ROUNDS):
            order = counts if round_index % 2 else tuple(reversed(counts))
            for count in order:
                if round_index or count != counts[0]:
                    scratch.time_block(count, samples[count])
    return measured_choice(default, tuple(_timing(n, samples[n]) for n in counts))


def _timing(threads: int, samples: list[float]) -> ThreadTiming:
    return ThreadTiming(threads, statistics.median(samples))


class _ScratchContext:
    """A small context of ``model`` that decodes a token at a time, reads its logits row and
    forgets it."""

    def __init__(self, model: llama_cpp.llama_model_p) -> None:
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = params.n_batch = params.n_ubatch = _CONTEXT_SIZE
        params.no_perf = True
        self._pointer = llama_cpp.llama_init_from_model(model, params)
        if not self._pointer:
            raise RuntimeBackendError(
                "llama.cpp could not create a small context to time thread counts "
                f"({llama_cpp_log.take_recent()}); set the CPU threads in the options"
            )
        self._memory = llama_cpp.llama_get_memory(self._pointer)
        vocab = llama_cpp.llama_model_get_vocab(model)
        token = max(llama_cpp.llama_vocab_bos(vocab), 0)
        self._token = np.full(1, token, dtype=np.int32)
        self._vocab_size = llama_cpp.llama_vocab_n_tokens(vocab)

    def __enter__(self) -> _ScratchContext:
        return self

    def __exit__(self, *_exc: object) -> None:
        llama_cpp.llama_free(self._pointer)

    def time_block(self, threads: int, samples: list[float]) -> float:
        """Time :data:`STEPS_PER_BLOCK` steps on a fresh pool of ``threads`` (after one to warm
        it) into ``samples``; the block's quickest step (what the model costs, with
        as little of the machine's load as the block saw)."""
        pools = ThreadPools(ThreadChoice(threads, threads, "timed"))
        try:
            # a context plans its graphs for its own thread count, which must be the pool's
            llama_cpp.llama_set_n_threads(self._pointer, threads, threads)
            pools.attach(self._pointer)
            self._decode()
            steps = [self._decode() for _ in range(STEPS_PER_BLOCK)]
        finally:
            llama_cpp.llama_memory_clear(self._memory, True)
            ThreadPools.detach(self._pointer)
            pools.close()
        samples.extend(steps)
        return min(steps)

    def _decode(self) -> float:
        llama_cpp.llama_memory_clear(self._memory, True)
        batch = llama_cpp.llama_batch_get_one(
            self._token.ctypes.data_as(llama_cpp.llama_token_p), 1
        )
        started = time.perf_counter()
        code = llama_cpp.llama_decode(self._pointer, batch)
        if code == 0:  # and read the row, as decoding does: the threads left it in their caches
            row = llama_cpp.llama_get_logits_ith(self._pointer, -1)
            np.ctypeslib.as_array(row, shape=(self._vocab_size,)).argmax()
        seconds = time.perf_counter() - started
        if code != 0:
            raise RuntimeBackendError(
                f"llama.cpp failed to decode while timing thread counts (code {code}: "
                f"{llama_cpp_log.take_recent()}); set the CPU threads in the options"
            )
        return seconds
