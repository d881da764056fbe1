"""With no thread count asked for, a CPU model's decoding step runs on llama.cpp's default or on
fewer threads where fewer are timed faster at load; the choice and its timings are said."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.runtime.backends.llama_cpp import thread_calibration
from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.backends.llama_cpp.thread_calibration import (
    ThreadTiming,
    candidate_counts,
    fastest,
    measured_choice,
)
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.cpu_threads import ThreadChoice, choose_threads

EIGHT_CORES = ThreadChoice(8, 8, "the 8 physical cores")


def test_the_default_is_timed_against_halves_down_to_one() -> None:
    assert candidate_counts(8) == (8, 4, 2, 1)
    assert candidate_counts(6) == (6, 3, 1)
    assert candidate_counts(1) == (1,)


def test_fewer_threads_are_taken_only_when_clearly_faster() -> None:
    default = ThreadTiming(8, 0.0010)
    assert fastest((default, ThreadTiming(4, 0.00097))) is default  # 3 % is noise
    quicker = ThreadTiming(2, 0.0008)
    assert fastest((default, ThreadTiming(4, 0.0009), quicker, ThreadTiming(1, 0.0012))) is quicker


def test_the_reason_names_the_choice_and_every_timing() -> None:
    timings = (ThreadTiming(8, 0.002), ThreadTiming(4, 0.001))
    chosen = measured_choice(EIGHT_CORES, timings)
    assert (chosen.threads, chosen.batch_threads) == (4, 8)
    assert chosen.describe() == (
        "threads 4, 8 for prompts (timed faster than 8 here: 8 threads 2.00 ms, 4 threads 1.00 ms)"
    )
    kept = measured_choice(EIGHT_CORES, (ThreadTiming(8, 0.001), ThreadTiming(4, 0.0011)))
    assert kept.describe() == (
        "threads 8 (the 8 physical cores; fewer were not faster: 8 threads 1.00 ms, "
        "4 threads 1.10 ms)"
    )
    long = measured_choice(EIGHT_CORES, (ThreadTiming(8, 0.035),))
    assert long.describe() == (
        "threads 8 (the 8 physical cores; a step takes 35 ms, long enough for every core)"
    )


@pytest.mark.skipif(choose_threads(0).threads < 2, reason="one core here: nothing to time")
def test_a_tiny_model_is_timed_at_load_and_once_per_process(tiny_models: dict[str, Path]) -> None:
    default = choose_threads(0)
    first = LlamaCppBackend(tiny_models["mtp"], LoadSettings(context_length=256))
    try:
        chosen = first.info.threads
        for count in candidate_counts(default.threads):  # each count's step, in milliseconds
            assert f"{count} thread{'s' if count > 1 else ''} " in chosen.reason
        assert chosen.batch_threads == default.batch_threads
    finally:
        first.close()
    again = LlamaCppBackend(tiny_models["mtp"], LoadSettings(context_length=256))
    try:
        assert again.info.threads is chosen
    finally:
        again.close()


@pytest.mark.skipif(choose_threads(0).threads < 2, reason="one core here: nothing to time")
def test_a_long_step_keeps_the_default_without_timing_fewer(
    tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(thread_calibration, "LONG_STEP_SECONDS", 0.0)  # any step is "long"
    monkeypatch.setattr(thread_calibration, "_chosen", {})
    backend = LlamaCppBackend(tiny_models["mtp"], LoadSettings(context_length=256))
    try:
        chosen = backend.info.threads
        assert chosen.threads == choose_threads(0).threads
        assert chosen.reason.endswith("long enough for every core")
    finally:
        backend.close()


def test_a_thread_count_asked_for_is_used_untimed(tiny_models: dict[str, Path]) -> None:
    backend = LlamaCppBackend(tiny_models["mtp"], LoadSettings(context_length=256, threads=1))
    try:
        assert backend.info.threads == ThreadChoice(1, 1, "set in the options")
    finally:
        backend.close()
