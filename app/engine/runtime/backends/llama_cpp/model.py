"""One GGUF loaded in llama.cpp: the model's lifetime and the contexts made from it.

Loading reads the file's ``{arch}.nextn_predict_layers`` first (``gguf_info``) and asks for the MTP
block (``load_mtp``) only when it is there: an MTP context on a model loaded without it aborts the
process. Contexts come in three roles (docs/architecture.md#the-llamacpp-backend): the drafting
target keeps ``n_rs_seq`` recurrent-state snapshots so a hybrid trunk can roll back a rejected
draft; a drafter's context (``LLAMA_CONTEXT_TYPE_MTP``, ``ctx_other`` = the target) runs the
nextn block of the same model or a separate drafter model (docs/drafters.md); a plain target keeps
no snapshots. Every context computes on the target model's persistent CPU thread pools
(:mod:`.threadpool`), as llama-server's do; a separate drafter model shares them.

A sliding-window (SWA) layer's cache holds the window plus one batch, unless ``swa_full`` keeps
every position (llama.cpp's default, which costs the whole context's KV for every sliding layer);
with the window only, a state is cut back only within the window and a prompt resumes further
back from a checkpoint of the window's cache (as llama-server does)."""

from __future__ import annotations

import hashlib
import os
import platform
from pathlib import Path

import llama_cpp

from app.engine.errors import RuntimeBackendError
from app.engine.learned_state import cpu_name
from app.engine.runtime.backends.gguf_info import GgufSummary
from app.engine.runtime.backends.llama_cpp import log as llama_cpp_log
from app.engine.runtime.backends.llama_cpp.contexts import ComputeTime, LlamaContext
from app.engine.runtime.backends.llama_cpp.cpu_backends import CpuVariant, load_installed
from app.engine.runtime.backends.llama_cpp.threadpool import ThreadPools
from app.engine.runtime.core.cpu_threads import ThreadChoice

BACKEND_NAME = "llama.cpp"
DEFAULT_CONTEXT = 4096
BATCH_SIZE = 512
_GPU_LAYERS_ALL = 999
KV_CACHE_TYPES = {
    "f16": llama_cpp.GGML_TYPE_F16,
    "q8_0": llama_cpp.GGML_TYPE_Q8_0,
    "q4_0": llama_cpp.GGML_TYPE_Q4_0,
}
FLASH_ATTENTION_MODES = {
    "auto": llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO,
    "on": llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED,
    "off": llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED,
}

_backend_initialised = False
_cpu_variant: CpuVariant | None = None


def initialise_once() -> None:
    """Route llama.cpp's log to our sink, load a portable build's CPU variant and initialise its
    backends (once per process)."""
    global _backend_initialised, _cpu_variant
    if not _backend_initialised:
        llama_cpp_log.install()
        _cpu_variant = load_installed()
        llama_cpp.llama_backend_init()
        _backend_initialised = True


def cpu_variant_name() -> str | None:
    """The CPU code a portable build picked (None: a native build, or not initialised yet)."""
    return _cpu_variant.name if _cpu_variant is not None else None


def machine_fingerprint(threads: ThreadChoice, gpu_layers: int, clock: str) -> str:
    """A short hash of the CPU, the llama.cpp build (its system info names the CPU features and
    GPU backends it uses), the llama-cpp-python version, threads, GPU offload and the clock
    cycles are timed with (times on different clocks cannot be compared)."""
    parts = (
        platform.machine(),
        cpu_name(),
        str(os.cpu_count()),
        llama_cpp.__version__,
        llama_cpp.llama_print_system_info().decode("utf-8", "replace"),
        f"threads={threads.threads}",
        f"gpu_layers={gpu_layers}",
        f"clock={clock}",
    )
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return f"{BACKEND_NAME}:{digest}"


class LlamaModel:
    """The loaded weights of ``path``; makes the contexts and frees itself last. A separate
    drafter model is loaded ``beside`` its target: its contexts compute on the target's thread
    pools (decodes run one at a time; a second set of pools would spin against the first) and
    its decode time adds to the target's."""

    def __init__(
        self,
        path: Path,
        summary: GgufSummary,
        *,
        load_mtp: bool,
        gpu_layers: int,
        beside: LlamaModel | None = None,
    ):
        self.path = path
        self.summary = summary
        params = llama_cpp.llama_model_default_params()
        params.load_mtp = load_mtp
        if gpu_layers >= 0:
            params.n_gpu_layers = gpu_layers
        elif llama_cpp.llama_supports_gpu_offload():
            params.n_gpu_layers = _GPU_LAYERS_ALL
        self.pointer = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
        if not self.pointer:
            raise RuntimeBackendError(
                f"llama.cpp could not load {path} ({llama_cpp_log.take_recent()}); the file "
                "may be truncated or of an architecture this llama.cpp does not support"
            )
        self.vocab = llama_cpp.llama_model_get_vocab(self.pointer)
        self.vocab_size = llama_cpp.llama_vocab_n_tokens(self.vocab)
        self.width = llama_cpp.llama_model_n_embd_out(self.pointer)
        self.input_width = llama_cpp.llama_model_n_embd_inp(self.pointer)
        self.trained_context = llama_cpp.llama_model_n_ctx_train(self.pointer)
        self.sliding_window = llama_cpp.llama_model_n_swa(self.pointer)
        self._beside = beside
        self._pools: ThreadPools | None = None
        self.compute = beside.compute if beside is not None else ComputeTime()
        """Time inside ``llama_decode``, summed over every context of this model (and of the
        drafter model beside it)."""
        self.recurrent = bool(
            llama_cpp.llama_model_is_recurrent(self.pointer)
            or llama_cpp.llama_model_is_hybrid(self.pointer)
        )

    def new_context(
        self,
        size: int,
        threads: ThreadChoice,
        *,
        kv_cache_type: str,
        flash_attention: str,
        rollback_depth: int = 0,
        reads: LlamaContext | None = None,
        swa_full: bool = True,
        sequences: int = 1,
    ) -> LlamaContext:
        """A target context keeping ``rollback_depth`` recurrent-state snapshots or, with
        ``reads`` (the target), an MTP context that reads that target (this model's nextn
        block, or this model when it is a separate drafter); ``swa_full`` False keeps only the
        window in sliding-window layers (a drafter reading a target must match the target);
        ``sequences`` > 1 holds that many sequences of ``size`` tokens each, the KV cache split
        between them, and takes a batch of every sequence's rows (:mod:`.step_gate`)."""
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = size * sequences
        params.n_batch = BATCH_SIZE * sequences
        params.n_ubatch = BATCH_SIZE
        params.n_seq_max = sequences
        if sequences > 1:
            params.kv_unified = False
        params.n_threads = threads.threads
        params.n_threads_batch = threads.batch_threads
        params.no_perf = True
        params.type_k = params.type_v = KV_CACHE_TYPES[kv_cache_type]
        params.flash_attn_type = FLASH_ATTENTION_MODES[flash_attention]
        params.swa_full = swa_full
        if reads is None:
            params.n_rs_seq = rollback_depth
        else:
            params.ctx_type = llama_cpp.LLAMA_CONTEXT_TYPE_MTP
            params.ctx_other = reads.pointer
            params.n_rs_seq = 0
        pools = self._thread_pools(threads)
        pointer = llama_cpp.llama_init_from_model(self.pointer, params)
        if not pointer:
            role = "MTP draft" if reads is not None else "inference"
            raise RuntimeBackendError(
                f"llama.cpp could not create the {role} context for {self.path.name} with "
                f"{size} tokens ({llama_cpp_log.take_recent()}); try a smaller --ctx"
            )
        pools.attach(pointer)
        return LlamaContext(
            pointer,
            model_name=self.path.name,
            vocab_size=self.vocab_size,
            width=self.width,
            compute=self.compute,
        )

    def _thread_pools(self, threads: ThreadChoice) -> ThreadPools:
        """The pools this model's contexts compute on (the target's, for a model beside it),
        started with the first context."""
        if self._beside is not None:
            return self._beside._thread_pools(threads)
        if self._pools is None:
            self._pools = ThreadPools(threads)
        return self._pools

    def close(self) -> None:
        """Free the model and its thread pools (after its contexts and the models beside it)."""
        if self._pools is not None:
            self._pools.close()
            self._pools = None
        if self.pointer:
            llama_cpp.llama_model_free(self.pointer)
        self.pointer = None
