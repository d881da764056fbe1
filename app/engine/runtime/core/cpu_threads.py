"""How many CPU threads llama.cpp runs with when the user does not say: what its own tools use.

llama.cpp's ``llama-server`` and ``llama-cli`` default to ``common_cpu_get_num_math()``
(``common/common.cpp`` of the pinned llama.cpp): the physical cores — one thread per core, since a
second hardware thread (SMT sibling) adds nothing to matrix arithmetic — and, on a hybrid Intel
CPU, only the performance cores, because a step runs its threads in lockstep and waits for the
slowest one at every barrier. Decoding a token is such a step, so :func:`choose_threads` gives the
same default. Batches (a prompt's prefill) split their rows into chunks that threads take as they
come, so an efficiency core adds work done instead of waiting: batch threads default to every
physical core (efficiency cores included, SMT siblings not). Where the two counts are the same — any
CPU that is not hybrid — this is exactly llama.cpp's default for both.

How the cores are counted, per system:

- **Linux**: ``/sys/devices/system/cpu/cpuN/topology/core_cpus_list`` (``thread_siblings_list`` on
  older kernels) groups the hardware threads of one core; only CPUs this process may run on
  (``sched_getaffinity``: a container's CPU set) are counted — llama.cpp counts the whole machine,
  which in a container limited to 2 of 64 CPUs would start 32 threads on 2 CPUs. Efficiency cores
  are those listed in ``/sys/devices/cpu_atom/cpus`` (hybrid Intel), else cores whose
  ``cpu_capacity`` is under half the largest (Arm big.LITTLE: the little cores).
- **macOS**: ``sysctl hw.perflevel0.physicalcpu`` (the performance cores of Apple silicon), else
  ``hw.physicalcpu``; every physical core: ``hw.physicalcpu``.
- **Windows**: ``GetLogicalProcessorInformationEx(RelationProcessorCore)``: one record per physical
  core, with its efficiency class (the highest class are the performance cores).
- Anywhere the count cannot be read: llama.cpp's own fallback, the logical CPUs up to 4, else half.

This module is light (no numpy, no llama.cpp): the command line shows the default in ``--help``.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

_LITTLE_CORE_CAPACITY = 0.5
"""A core with under this share of the largest ``cpu_capacity`` is an efficiency core."""
_WINDOWS_CORE_RELATION = 0  # RelationProcessorCore
_WINDOWS_RECORD_HEADER = struct.Struct("<II")  # Relationship, Size
_WINDOWS_CORE_FLAGS = struct.Struct("<BB")  # Flags, EfficiencyClass


@dataclass(frozen=True)
class CpuCores:
    """The machine's cores as llama.cpp's thread defaults see them.

    ``performance``: physical performance cores (every physical core on a CPU that is not
    hybrid); ``physical``: every physical core; ``logical``: hardware threads; ``source``: where
    the counts came from.
    """

    performance: int
    physical: int
    logical: int
    source: str

    def describe(self) -> str:
        """``the 8 performance cores (of 12 physical, 20 logical)`` or ``the 2 physical cores``."""
        if self.performance < self.physical:
            cores = f"the {self.performance} performance cores (of {self.physical} physical"
            return cores + (f", {self.logical} logical)" if self.logical > self.physical else ")")
        cores = f"the {self.physical} physical cores"
        return cores + (f" ({self.logical} logical)" if self.logical > self.physical else "")


@dataclass(frozen=True)
class ThreadChoice:
    """Threads for a decoding step (``threads``) and for a batch such as a prompt's prefill
    (``batch_threads``), and why (``reason``)."""

    threads: int
    batch_threads: int
    reason: str

    def describe(self) -> str:
        """``threads 2 (the 2 physical cores)``, with the batch threads when they differ."""
        batch = f", {self.batch_threads} for prompts" if self.batch_threads != self.threads else ""
        return f"threads {self.threads}{batch} ({self.reason})"


def choose_threads(requested: int = 0) -> ThreadChoice:
    """``requested`` threads for steps and batches alike (as llama.cpp's ``-t`` without ``-tb``),
    or with 0 llama.cpp's default for this machine (:func:`machine_cores`)."""
    if requested > 0:
        return ThreadChoice(requested, requested, "set in the options")
    cores = machine_cores()
    return ThreadChoice(cores.performance, cores.physical, cores.describe())


@cache
def machine_cores() -> CpuCores:
    """This machine's cores (read once per process)."""
    if sys.platform.startswith("linux"):
        cores = linux_cores(Path("/sys"), _allowed_cpus())
    elif sys.platform == "darwin":
        cores = _macos_cores()
    elif sys.platform == "win32":
        cores = _windows_cores()
    else:
        cores = None
    return cores or fallback_cores(_logical_cpus())


def fallback_cores(logical: int) -> CpuCores:
    """llama.cpp's guess when the topology cannot be read: all logical CPUs up to 4, else half
    (assuming two hardware threads per core)."""
    physical = logical if logical <= 4 else logical // 2
    return CpuCores(physical, physical, logical, "estimated from the logical CPUs")


def linux_cores(sys_root: Path, allowed: Iterable[int] | None = None) -> CpuCores | None:
    """The cores under ``sys_root`` (``/sys``) among the CPUs ``allowed`` (None: every CPU listed);
    None when the topology is not there."""
    cpu_root = sys_root / "devices" / "system" / "cpu"
    listed = sorted(
        int(entry.name[3:])
        for entry in (cpu_root.iterdir() if cpu_root.is_dir() else ())
        if entry.name.startswith("cpu") and entry.name[3:].isdigit()
    )
    online = _read_cpu_list(cpu_root / "online")
    cpus = [cpu for cpu in listed if online is None or cpu in online]
    if allowed is not None:
        cpus = [cpu for cpu in cpus if cpu in set(allowed)]
    cores: dict[str, list[int]] = {}
    for cpu in cpus:
        topology = cpu_root / f"cpu{cpu}" / "topology"
        siblings = _read_text(topology / "core_cpus_list") or _read_text(
            topology / "thread_siblings_list"
        )
        if siblings is None:
            return None
        cores.setdefault(siblings, []).append(cpu)
    if not cores:
        return None
    efficiency = _efficiency_cpus(sys_root, cpu_root, cpus)
    performance = sum(1 for members in cores.values() if not efficiency.intersection(members))
    hybrid = " (hybrid: efficiency cores left out of steps)" if performance < len(cores) else ""
    return CpuCores(
        performance=performance or len(cores),
        physical=len(cores),
        logical=len(cpus),
        source=f"Linux CPU topology{hybrid}",
    )


def _efficiency_cpus(sys_root: Path, cpu_root: Path, cpus: list[int]) -> set[int]:
    """CPUs of efficiency cores: hybrid Intel's ``cpu_atom`` PMU, else the low-capacity ones."""
    atom = _read_cpu_list(sys_root / "devices" / "cpu_atom" / "cpus")
    if atom is not None:
        return atom
    capacities = {}
    for cpu in cpus:
        text = _read_text(cpu_root / f"cpu{cpu}" / "cpu_capacity")
        if text is None or not text.isdigit():
            return set()
        capacities[cpu] = int(text)
    largest = max(capacities.values(), default=0)
    return {cpu for cpu, value in capacities.items() if value < _LITTLE_CORE_CAPACITY * largest}


def parse_cpu_list(text: str) -> set[int]:
    """The CPUs of a kernel CPU list such as ``0-3,8,10-11``; ValueError when malformed."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def _read_cpu_list(path: Path) -> set[int] | None:
    text = _read_text(path)
    if text is None:
        return None
    try:
        return parse_cpu_list(text)
    except ValueError:
        return None


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _allowed_cpus() -> set[int] | None:
    getaffinity = getattr(os, "sched_getaffinity", None)
    return set(getaffinity(0)) if getaffinity is not None else None


def _logical_cpus() -> int:
    allowed = _allowed_cpus()
    return len(allowed) if allowed else os.cpu_count() or 4


def _macos_cores() -> CpuCores | None:
    try:
        libc = ctypes.CDLL("libc.dylib")
    except OSError:
        return None

    def sysctl_int(name: str) -> int | None:
        value, size = ctypes.c_int32(0), ctypes.c_size_t(4)
        found = libc.sysctlbyname(name.encode(), ctypes.byref(value), ctypes.byref(size), None, 0)
        return value.value if found == 0 and value.value > 0 else None

    physical = sysctl_int("hw.physicalcpu")
    if physical is None:
        return None
    performance = sysctl_int("hw.perflevel0.physicalcpu") or physical
    logical = sysctl_int("hw.logicalcpu") or physical
    return CpuCores(min(performance, physical), physical, logical, "macOS sysctl hw.perflevel0")


def _windows_cores() -> CpuCores | None:
    kernel32 = ctypes.WinDLL("kernel32")  # type: ignore[attr-defined]
    size = ctypes.c_uint32(0)
    kernel32.GetLogicalProcessorInformationEx(_WINDOWS_CORE_RELATION, None, ctypes.byref(size))
    if size.value == 0:
        return None
    buffer = ctypes.create_string_buffer(size.value)
    if not kernel32.GetLogicalProcessorInformationEx(
        _WINDOWS_CORE_RELATION, buffer, ctypes.byref(size)
    ):
        return None
    return windows_cores(buffer.raw[: size.value], _logical_cpus())


def windows_cores(records: bytes, logical: int) -> CpuCores | None:
    """The cores in a ``GetLogicalProcessorInformationEx(RelationProcessorCore)`` buffer: one
    record per physical core (Relationship, Size, then PROCESSOR_RELATIONSHIP's Flags and
    EfficiencyClass); the cores of the highest efficiency class are the performance cores."""
    classes: list[int] = []
    offset = 0
    while offset + _WINDOWS_RECORD_HEADER.size + _WINDOWS_CORE_FLAGS.size <= len(records):
        relationship, size = _WINDOWS_RECORD_HEADER.unpack_from(records, offset)
        if size <= 0:
            return None
        if relationship == _WINDOWS_CORE_RELATION:
            _flags, efficiency_class = _WINDOWS_CORE_FLAGS.unpack_from(
                records, offset + _WINDOWS_RECORD_HEADER.size
            )
            classes.append(efficiency_class)
        offset += size
    if not classes:
        return None
    performance = classes.count(max(classes))
    return CpuCores(performance, len(classes), max(logical, len(classes)), "Windows processor info")
