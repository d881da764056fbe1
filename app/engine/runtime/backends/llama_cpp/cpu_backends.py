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
import importlib.util
import multiprocessing
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
    """The CPU variants this CPU runs, best first, as ggml's backend registry ranks them (each
    module finds the libggml-base it links to beside itself, or the one already loaded)."""
    scored = []
    for path in cpu_modules(folder):
        module = ctypes.CDLL(str(path))
        module.ggml_backend_score.restype = ctypes.c_int
        scored.append(CpuVariant(_variant_name(path), path, module.ggml_backend_score()))
    return tuple(sorted((v for v in scored if v.score > 0), key=lambda v: -v.score))


def installed_folder() -> Path:
    """The folder of the installed llama-cpp-python's libraries (imports it)."""
    import llama_cpp

    return Path(llama_cpp.__file__).parent / "lib"


def load_installed() -> CpuVariant | None:
    """:func:`load_cpu_backends` for the installed llama-cpp-python: call it before anything
    asks llama.cpp about its backends (``llama_backend_init``, ``llama_supports_gpu_offload``).

    ggml's functions are looked up through libllama's handle, which resolves them in the libggml
    libllama itself links to: the wheel holds libggml.so, .so.0 and .so.0.x as three copies, and
    a registry filled through another copy would stay empty for llama.cpp. (Windows has one
    ggml.dll, which libllama does not re-export.)
    """
    return load_cpu_backends(ggml_handle(), installed_folder())


def ggml_handle() -> ctypes.CDLL:
    """The handle to look ggml's functions up through: libllama's (see :func:`load_installed`;
    a lookup through another libggml copy sees an empty backend registry in a portable build),
    or ggml.dll on Windows."""
    import llama_cpp._ggml
    import llama_cpp.llama_cpp

    return llama_cpp._ggml.libggml if sys.platform == "win32" else llama_cpp.llama_cpp._lib


def load_cpu_backends(libggml: ctypes.CDLL, folder: Path) -> CpuVariant | None:
    """Load a portable build's best CPU variant (or the forced one) and its other backends
    through ``libggml``, a handle that resolves ggml's functions.

    Returns the variant loaded, or None for a native build, whose CPU code is built in. Called
    before ``llama_backend_init``, which would otherwise look for them in the wrong folders.
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


def illegal_instruction_advice() -> str:
    """Why llama.cpp's code died by SIGILL and what to do, for the worker's parent process
    (which never loads llama.cpp: a portable build's variants are ranked in a child process)."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        return "llama-cpp-python is not installed; run: bash packaging/setup.sh"
    folder = Path(spec.origin).parent / "lib"
    if not cpu_modules(folder):
        return (
            f"llama.cpp's CPU code (in {folder}) was compiled for a CPU with more instruction "
            "sets than this one — llama.cpp's default, -march=native, on another machine — or "
            "this machine claims one it cannot run (AVX-512 or AMX in some VMs); rebuild "
            "llama.cpp portably, its CPU code picked at load: bash packaging/setup.sh --portable"
        )
    forced = os.environ.get(VARIANT_ENV, "").strip()
    try:
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            ranked = pool.apply_async(_runnable_names, (folder,)).get(60)
    except Exception:  # the advice must not fail: fall back to the names alone
        ranked = []
    chosen = forced or (ranked[0] if ranked else "")
    lower = ranked[ranked.index(chosen) + 1 :] if chosen in ranked else ranked
    if not lower:
        names = ", ".join(_variant_name(path) for path in cpu_modules(folder))
        return (
            f"llama.cpp's CPU variant {chosen or 'for this CPU'} (in {folder}) uses an "
            "instruction this CPU claims but does not run; choose a more basic one with "
            f"{VARIANT_ENV}=<name> (this build has: {names})"
        )
    return (
        f"llama.cpp's CPU variant for this CPU, {chosen} (in {folder}), uses an instruction "
        "this CPU claims but does not run (AVX-512 or AMX in some VMs); start MTP Studio with "
        f"{VARIANT_ENV}={lower[0]} to use the next one down"
    )


def _runnable_names(folder: Path) -> list[str]:
    return [variant.name for variant in runnable_variants(folder)]
