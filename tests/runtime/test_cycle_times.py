"""A depth's recent cycle cost: a slow moment cannot hide it, a lasting slowdown is followed."""

from __future__ import annotations

from app.engine.runtime.speculative.cycle_times import BUCKET_CYCLES, HORIZON_CYCLES, CycleTimes


def test_a_slow_moment_leaves_the_cost_measured_just_before() -> None:
    times = CycleTimes()
    for now in range(100):
        times.add(0.010, now)
    for now in range(100, 160):  # a whole slow request
        times.add(0.020, now)
    assert times.fastest(160) == 0.010


def test_a_lasting_slowdown_becomes_the_cost_once_the_horizon_has_passed() -> None:
    times = CycleTimes()
    for now in range(100):
        times.add(0.010, now)
    for now in range(100, 100 + HORIZON_CYCLES + 2 * BUCKET_CYCLES):
        times.add(0.020, now)
    assert times.fastest(100 + HORIZON_CYCLES + 2 * BUCKET_CYCLES) == 0.020


def test_a_depth_tried_now_and_then_keeps_its_last_visit() -> None:
    times = CycleTimes()
    times.add(0.015, 10)
    times.add(0.014, 11)
    assert times.fastest(10 * HORIZON_CYCLES) == 0.014  # long after: still its latest cost
    times.add(0.016, 10 * HORIZON_CYCLES)
    assert times.fastest(10 * HORIZON_CYCLES) == 0.016  # a new visit replaces the old one


def test_what_is_saved_comes_back_as_the_same_cost() -> None:
    times = CycleTimes()
    for now in range(0, 3 * BUCKET_CYCLES):
        times.add(0.010 + now * 1e-5, now)
    restored = CycleTimes(times.saved())
    assert restored.fastest(0) == times.fastest(3 * BUCKET_CYCLES) == 0.010
    assert len(times.saved()) == 3 and not CycleTimes()
