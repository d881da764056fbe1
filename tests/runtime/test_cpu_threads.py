"""The default thread counts are llama.cpp's: physical performance cores for a step, every
physical core for a batch — read from fake /sys trees of machines this one is not."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from app.engine.load_options import FIELD_NAMES, LoadOptions, load_options_problem
from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.backends.llama_cpp.thread_calibration import candidate_counts
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.cpu_threads import (
    choose_threads,
    fallback_cores,
    linux_cores,
    machine_cores,
    parse_cpu_list,
    windows_cores,
)


def fake_sys(
    root: Path,
    cores: list[list[int]],
    *,
    online: str | None = None,
    atom: str | None = None,
    capacity: dict[int, int] | None = None,
    siblings_file: str = "core_cpus_list",
) -> Path:
    """A /sys tree whose CPUs are grouped into ``cores`` (lists of hardware threads)."""
    cpu_root = root / "devices" / "system" / "cpu"
    for members in cores:
        listed = ",".join(str(cpu) for cpu in members)
        for cpu in members:
            topology = cpu_root / f"cpu{cpu}" / "topology"
            topology.mkdir(parents=True)
            (topology / siblings_file).write_text(listed + "\n")
            if capacity is not None:
                (cpu_root / f"cpu{cpu}" / "cpu_capacity").write_text(f"{capacity[cpu]}\n")
    (cpu_root / "cpufreq").mkdir()  # not a CPU: ignored
    if online is not None:
        (cpu_root / "online").write_text(online + "\n")
    if atom is not None:
        (root / "devices" / "cpu_atom").mkdir(parents=True)
        (root / "devices" / "cpu_atom" / "cpus").write_text(atom + "\n")
    return root


def test_smt_siblings_count_as_one_core(tmp_path: Path) -> None:
    # 4 cores, 2 hardware threads each (Linux numbers siblings n and n + 4)
    root = fake_sys(tmp_path, [[0, 4], [1, 5], [2, 6], [3, 7]])
    cores = linux_cores(root)
    assert (cores.performance, cores.physical, cores.logical) == (4, 4, 8)
    assert cores.describe() == "the 4 physical cores (8 logical)"


def test_older_kernels_name_the_siblings_thread_siblings_list(tmp_path: Path) -> None:
    root = fake_sys(tmp_path, [[0, 1], [2, 3]], siblings_file="thread_siblings_list")
    assert linux_cores(root).physical == 2


def test_hybrid_intel_steps_leave_the_efficiency_cores_out_and_batches_use_them(
    tmp_path: Path,
) -> None:
    # an i7-12700H-like part: 6 performance cores with SMT (CPUs 0-11), 8 efficiency cores (12-19)
    performance = [[2 * core, 2 * core + 1] for core in range(6)]
    efficiency = [[cpu] for cpu in range(12, 20)]
    root = fake_sys(tmp_path, performance + efficiency, atom="12-19")
    cores = linux_cores(root)
    assert (cores.performance, cores.physical, cores.logical) == (6, 14, 20)
    assert cores.describe() == "the 6 performance cores (of 14 physical, 20 logical)"
    assert "hybrid" in cores.source


def test_arm_little_cores_are_found_by_their_capacity(tmp_path: Path) -> None:
    # one prime core, three big ones, four little ones
    capacity = {0: 1024, 1: 870, 2: 870, 3: 870, 4: 380, 5: 380, 6: 380, 7: 380}
    root = fake_sys(tmp_path, [[cpu] for cpu in range(8)], capacity=capacity)
    cores = linux_cores(root)
    assert (cores.performance, cores.physical) == (4, 8)


def test_equal_capacities_are_not_hybrid(tmp_path: Path) -> None:
    root = fake_sys(tmp_path, [[0], [1]], capacity={0: 1024, 1: 1024})
    assert linux_cores(root).performance == 2


def test_only_online_cpus_and_cpus_this_process_may_use_count(tmp_path: Path) -> None:
    root = fake_sys(tmp_path, [[0, 4], [1, 5], [2, 6], [3, 7]], online="0-2,4-6")
    assert linux_cores(root).physical == 3
    # a container pinned to CPUs 0 and 1: two cores, not the machine's four
    assert linux_cores(root, allowed={0, 1}).physical == 2


def test_no_topology_gives_none_and_llamas_fallback_applies(tmp_path: Path) -> None:
    assert linux_cores(tmp_path) is None
    assert fallback_cores(4).performance == 4  # up to 4 logical CPUs: all of them
    assert fallback_cores(16).performance == 8  # more: half (two hardware threads per core)


def test_cpu_lists_are_parsed_as_the_kernel_writes_them() -> None:
    assert parse_cpu_list("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    with pytest.raises(ValueError):
        parse_cpu_list("0-x")


def _windows_core(efficiency_class: int, smt: bool) -> bytes:
    """One RelationProcessorCore record: header, PROCESSOR_RELATIONSHIP, one GROUP_AFFINITY."""
    body = struct.pack("<BB20sH", 1 if smt else 0, efficiency_class, b"", 1)
    body += struct.pack("<QH6s", 0b11, 0, b"")  # GROUP_AFFINITY: mask, group, reserved
    return struct.pack("<II", 0, 8 + len(body)) + body


def test_windows_records_give_physical_and_performance_cores() -> None:
    hybrid = b"".join([_windows_core(1, smt=True)] * 6 + [_windows_core(0, smt=False)] * 8)
    cores = windows_cores(hybrid, logical=20)
    assert (cores.performance, cores.physical, cores.logical) == (6, 14, 20)
    uniform = b"".join([_windows_core(0, smt=True)] * 4)
    assert windows_cores(uniform, logical=8).performance == 4
    assert windows_cores(b"", logical=8) is None


def test_the_default_is_this_machines_cores_and_a_setting_overrides_both_counts() -> None:
    cores = machine_cores()
    default = choose_threads(0)
    assert (default.threads, default.batch_threads) == (cores.performance, cores.physical)
    assert default.reason == cores.describe()
    assert 1 <= default.threads <= default.batch_threads
    chosen = choose_threads(3)
    assert (chosen.threads, chosen.batch_threads) == (3, 3)
    assert chosen.describe() == "threads 3 (set in the options)"


def test_a_bad_thread_count_is_refused_naming_the_option() -> None:
    problem = load_options_problem(LoadOptions(threads=-1), {**FIELD_NAMES, "threads": "--threads"})
    assert problem is not None and problem.startswith("--threads -1 is invalid")
    assert load_options_problem(LoadOptions(threads=513)) is not None
    assert load_options_problem(LoadOptions(threads=8)) is None


def test_llama_cpp_runs_with_the_default_counts(tiny_models: dict[str, Path]) -> None:
    backend = LlamaCppBackend(tiny_models["mtp"], LoadSettings(context_length=256))
    try:
        default, chosen = choose_threads(0), backend.info.threads
        # prompts get llama.cpp's default; steps it too, or fewer timed faster at load
        assert chosen.batch_threads == default.batch_threads
        assert chosen.threads in candidate_counts(default.threads)
        for context in backend.contexts:  # the target and the MTP head's context
            assert context.thread_counts == (chosen.threads, chosen.batch_threads)
    finally:
        backend.close()
