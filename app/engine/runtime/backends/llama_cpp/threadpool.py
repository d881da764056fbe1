"""Persistent CPU thread pools for a model's llama.cpp contexts, as llama.cpp's own tools keep.

A context without an attached pool gets a throwaway one for every graph it computes: on a build
without OpenMP (Apple clang has none, so macOS builds) that starts and joins every worker thread
for every token; with OpenMP the team is reused, but the pool is still set up per graph.
llama-server (``common_threadpools::init`` in the pinned llama.cpp's ``common/common.cpp``) makes
one pool for steps and, when the batch thread count differs, one for batches (the step pool then
starts paused), and attaches them with ``llama_attach_threadpool``; this does the same, through
the same entry points (the CPU backend's registry hands out ``ggml_threadpool_new``), since
llama-cpp-python binds none of them. A model's contexts decode one at a time on one thread, so
they share the pools, and so does a separate drafter model's context (its target's pools: two
sets would spin against each other between the alternating decodes).
"""

from __future__ import annotations

import ctypes

import llama_cpp

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.backends.llama_cpp.cpu_backends import ggml_handle
from app.engine.runtime.core.cpu_threads import ThreadChoice

_MAX_THREADS = 512  # GGML_MAX_N_THREADS: the size of the CPU mask
_CPU_DEVICE = 0  # GGML_BACKEND_DEVICE_TYPE_CPU


class _PoolParams(ctypes.Structure):
    """``struct ggml_threadpool_params`` (ggml.h)."""

    _fields_ = [
        ("cpumask", ctypes.c_bool * _MAX_THREADS),
        ("n_threads", ctypes.c_int),
        ("prio", ctypes.c_int),
        ("poll", ctypes.c_uint32),
        ("strict_cpu", ctypes.c_bool),
        ("paused", ctypes.c_bool),
    ]


def _ggml_function(name: str, restype: object, *argtypes: object) -> ctypes._CFuncPtr:
    # through libllama's handle, as the CPU variant was loaded: a portable build's registry is
    # empty seen through the wheel's other libggml copies
    function = ggml_handle()[name]  # a fresh function object: its types are ours alone
    function.restype, function.argtypes = restype, list(argtypes)
    return function


_params_init = _ggml_function(
    "ggml_threadpool_params_init", None, ctypes.POINTER(_PoolParams), ctypes.c_int
)
_device_by_type = _ggml_function("ggml_backend_dev_by_type", ctypes.c_void_p, ctypes.c_int)
_device_registry = _ggml_function("ggml_backend_dev_backend_reg", ctypes.c_void_p, ctypes.c_void_p)
_proc_address = _ggml_function(
    "ggml_backend_reg_get_proc_address", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p
)
_attach = llama_cpp.llama_cpp._lib[
    "llama_attach_threadpool"
]  # a fresh function object: its types are ours
_attach.restype, _attach.argtypes = None, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
_detach = llama_cpp.llama_cpp._lib["llama_detach_threadpool"]
_detach.restype, _detach.argtypes = None, [ctypes.c_void_p]
_NEW_POOL = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(_PoolParams))
_FREE_POOL = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class ThreadPools:
    """The step pool and (when its thread count differs) the batch pool of one model."""

    def __init__(self, threads: ThreadChoice) -> None:
        device = _device_by_type(_CPU_DEVICE)
        registry = _device_registry(device) if device else None
        new = _proc_address(registry, b"ggml_threadpool_new") if registry else None
        free = _proc_address(registry, b"ggml_threadpool_free") if registry else None
        if not new or not free:
            raise RuntimeBackendError(
                "this llama.cpp build has no CPU backend thread pool (ggml_threadpool_new); "
                "reinstall llama-cpp-python with packaging/setup.sh"
            )
        self._new, self._free = _NEW_POOL(new), _FREE_POOL(free)
        self.batch = (
            self._make(threads.batch_threads, paused=False)
            if threads.batch_threads != threads.threads
            else None
        )
        self.step = self._make(threads.threads, paused=self.batch is not None)

    def _make(self, count: int, *, paused: bool) -> int:
        params = _PoolParams()
        _params_init(ctypes.byref(params), count)
        params.paused = paused
        pool = self._new(ctypes.byref(params))
        if not pool:
            raise RuntimeBackendError(f"llama.cpp could not start a pool of {count} CPU threads")
        return pool

    def attach(self, context: llama_cpp.llama_context_p) -> None:
        """Let ``context`` compute steps and batches on these pools."""
        _attach(context, self.step, self.batch or self.step)

    @staticmethod
    def detach(context: llama_cpp.llama_context_p) -> None:
        """Let ``context`` compute on a throwaway pool again (before its pools are freed)."""
        _detach(context)

    def close(self) -> None:
        """Free the pools (after every context using them is freed)."""
        for pool in (self.batch, self.step):
            if pool:
                self._free(pool)
        self.batch = self.step = None
