"""Entry point of the frozen (PyInstaller) app: the same CLI and window as ``mtp-studio``.

A frozen executable re-runs itself for every ``spawn``-ed child (the inference worker, the
accelerator probe); ``freeze_support`` makes such a child run its target instead of the CLI.
Before anything native loads, an x86-64 CPU below the bundle's floor is told so in one line
instead of dying by an illegal instruction: numpy's wheels need x86-64-v2 (llama.cpp's portable
CPU variants go lower, mlx's Linux build needs no more than x86-64). Before Qt loads, the
desktop-library check turns Qt's "could not load the Qt platform plugin" abort into a message that
names the package to install.
"""

import multiprocessing
import os
import platform
import sys
from pathlib import Path

# x86-64-v2 as /proc/cpuinfo names its parts (CMPXCHG16B, LAHF/SAHF, POPCNT, SSE3 to SSE4.2).
X86_64_V2 = ("cx16", "lahf_lm", "popcnt", "pni", "ssse3", "sse4_1", "sse4_2")


def missing_instruction_sets() -> list[str]:
    """The x86-64-v2 parts this CPU lacks (Linux; MTP_STUDIO_CPUINFO replaces /proc/cpuinfo)."""
    cpuinfo = Path(os.environ.get("MTP_STUDIO_CPUINFO", "/proc/cpuinfo"))
    if platform.machine() != "x86_64" or not cpuinfo.is_file():
        return []
    for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("flags"):
            flags = set(line.partition(":")[2].split())
            return [part for part in X86_64_V2 if part not in flags]
    return []


if __name__ == "__main__":
    multiprocessing.freeze_support()
    if missing := missing_instruction_sets():
        print(
            f"mtp-studio: this CPU lacks {' '.join(missing)}, part of x86-64-v2, which MTP "
            "Studio's libraries need (Intel CPUs since 2008, AMD since 2011); it cannot run here",
            file=sys.stderr,
        )
        sys.exit(1)
    from app.cli import main

    sys.exit(main())
