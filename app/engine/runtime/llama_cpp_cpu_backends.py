"""Loads llama.cpp's CPU code the way the installed build needs, and says which code it loaded.

A native build (llama.cpp's default, ``-march=native``) links one CPU backend, compiled for the
machine that built it, into libggml: nothing to load. A portable build (``GGML_BACKEND_DL`` with
``GGML_CPU_ALL_VARIANTS``: ``packaging/setup.sh --portable`` and the bundle) ships one
``libggml-cpu-<variant>`` module per micro-architecture beside libllama and loads none by itself
(ggml looks only beside the executable, which is python, and in the working directory). Here the
variants are scored as ggml scores them — each module's ``ggml_backend_score``: 0 when the CPU
lacks an instruction set it needs, higher the more it uses — and the best one is loaded, or the
one named by ``MTP_STUDIO_CPU_VARIANT``: a lower one where a CPU claims an extension it faults on
(AMX in some VMs), and the bundle test's baseline. A portable GPU build's other backend modules
(CUDA, Vulkan…) are loaded too.

Standard library and ctypes only: ``packaging/smoke_llama.py`` reads this file by its path before
the app is installed.
"""

from __future__ import annotations

import ctypes
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from app.engine.errors import RuntimeBackendError

VARIANT_ENV = "MTP_STUDIO_CPU_VARIANT"
_PREFIX, _SUFFIX = ("", ".dll") if sys.platform == "win32" else ("lib", ".so")
_CPU_MODULE = f"{_PREFIX}ggml-cpu-"
_loaded: dict[Path, CpuVariant] = {}


@dataclass(frozen=True)
class CpuVariant:
    """One CPU module of a portable build and ggml's score for it on this CPU (0: cannot run)."""

    name: str
    path: Path
    score: int


def cpu_modules(folder: Path) -> tuple[Path, ...]:
    """The ``libggml-cpu-<variant>`` modules in ``folder`` (none: a native build)."""
    return tuple(sorted(folder.glob(f"{_CPU_MODULE}*{_SUFFIX}")))


def runnable_variants(folder: Path) -> tuple[CpuVariant, ...]:
    """The CPU variants this CPU runs, best first, as ggml's backend registry ranks them."""
    scored = []
    for path in cpu_modules(folder):
        module = ctypes.CDLL(str(path))
        module.ggml_backend_score.restype = ctypes.c_int
        scored.append(CpuVariant(_variant_name(path), path, module.ggml_backend_score()))
    return tuple(sorted((v for v in scored if v.score > 0), key=lambda v: -v.score))


def load_cpu_backends(libggml: ctypes.CDLL, folder: Path) -> CpuVariant | None:
    """Load a portable build's best CPU variant (or the forced one) and its other backends.

    Returns the variant loaded, or None for a native build, whose CPU code is built in. Call it
    before ``llama_backend_init``, which would otherwise look in the wrong folders.
    """
    libggml.ggml_backend_reg_count.restype = ctypes.c_size_t
    libggml.ggml_backend_load.restype = ctypes.c_void_p
    libggml.ggml_backend_load.argtypes = [ctypes.c_char_p]
    forced = os.environ.get(VARIANT_ENV, "").strip() or None
    loaded = libggml.ggml_backend_reg_count() > 0
    if not cpu_modules(folder) and loaded:
        if forced is not None:
            raise RuntimeBackendError(
                f"{VARIANT_ENV}={forced} chooses a CPU variant, but the llama.cpp in {folder} is "
                "a native build with its CPU code built in; unset it, or rebuild llama.cpp "
                "portably: bash packaging/setup.sh --portable"
            )
        return None
    if loaded:  # by an earlier call
        return _loaded.get(folder)
    variant = _chosen_variant(folder, forced)
    for path in (variant.path, *_other_backend_modules(folder)):
        if not libggml.ggml_backend_load(os.fsencode(path)):
            raise RuntimeBackendError(f"llama.cpp could not load its backend module {path}")
    _loaded[folder] = variant
    return variant


def _chosen_variant(folder: Path, forced: str | None) -> CpuVariant:
    modules = cpu_modules(folder)
    if not modules:
        raise RuntimeBackendError(
            f"the llama.cpp in {folder} has no CPU backend (neither built in nor a "
            f"{_CPU_MODULE}<variant>{_SUFFIX} module); reinstall it: bash packaging/setup.sh"
        )
    runnable = runnable_variants(folder)
    names = ", ".join(v.name for v in runnable) or "none"
    if forced is None:
        if not runnable:
            raise RuntimeBackendError(
                f"no CPU variant of the llama.cpp in {folder} runs on this CPU (it lacks the "
                "instruction sets of even the most basic one)"
            )
        return runnable[0]
    for variant in runnable:
        if variant.name == forced:
            return variant
    if forced in {_variant_name(path) for path in modules}:
        why = "needs an instruction set this CPU lacks"
    else:
        why = "is not one of this build's CPU variants"
    raise RuntimeBackendError(f"{VARIANT_ENV}={forced} {why}; this CPU runs: {names}")


def _other_backend_modules(folder: Path) -> tuple[Path, ...]:
    """A portable GPU build's accelerator modules (``libggml-cuda``, ``libggml-vulkan``…)."""
    return tuple(
        path
        for path in sorted(folder.glob(f"{_PREFIX}ggml-*{_SUFFIX}"))
        if not path.name.startswith((_CPU_MODULE, f"{_PREFIX}ggml-base"))
    )


def _variant_name(path: Path) -> str:
    return path.name.removeprefix(_CPU_MODULE).removesuffix(_SUFFIX)
