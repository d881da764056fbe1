"""Loads llama.cpp's libraries before numpy, in each process that runs llama.cpp.

Seen on an NVIDIA H100 with a CUDA build of the pinned llama-cpp-python (CUDA 13, sm_90, the
machine's own compiler): when numpy — any version — is imported before ``llama_cpp``, the first
model load (even ``vocab_only``, even with no layer on the GPU) dies by SIGSEGV in the
tokenizer's set-up, where libllama's ``std::ostream << long`` runs a libstdc++ copy inside
libggml-cuda.so. Imported the other way round, the same load works. CPU builds load either way.
A worker process whose first import pulled numpy in crashed on every model; the server's
prompt counter (a ``vocab_only`` load in the server process) would have taken the server down
with the first request. So each process that loads a model calls :func:`load_llama_cpp_first`
before it imports anything that imports numpy: the inference worker (:mod:`..process.worker_entry`),
the CLI commands that count or run in their own process (``serve``, ``bench``) and the test suite.

Standard library only, and importing this module loads nothing.
"""

from __future__ import annotations

import importlib.util
import sys


def load_llama_cpp_first() -> bool:
    """Import ``llama_cpp`` (its ctypes module loads libllama and libggml) unless numpy is
    already in this process. Returns whether llama.cpp's libraries are now loaded ahead of numpy
    (False: llama-cpp-python is not installed, or numpy came first and it is too late)."""
    if "llama_cpp.llama_cpp" in sys.modules:
        return _loaded_before_numpy()
    if "numpy" in sys.modules or importlib.util.find_spec("llama_cpp") is None:
        return False
    import llama_cpp.llama_cpp  # noqa: F401  (loads the shared libraries; numpy is not imported)

    return True


def _loaded_before_numpy() -> bool:
    """Whether ``llama_cpp.llama_cpp`` entered ``sys.modules`` (which keeps insertion order)
    before numpy did."""
    names = list(sys.modules)
    llama = names.index("llama_cpp.llama_cpp")
    return "numpy" not in sys.modules or llama < names.index("numpy")
