"""Launch commands for serving a catalog model with MTP on a GPU cluster (vLLM, SGLang,
llama-server), with a tensor-parallel size suggested from the model's size and the GPUs' memory.

The biggest MTP models do not fit one machine; their users run them on engines that do MTP
natively. This module writes the command lines; the "Run on a cluster…" dialog shows and copies
them. Flags were checked against each project's documentation (pages cited where used).
"""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass

from app.engine.errors import CatalogError

# Weights are about parameters × bytes per parameter; the KV cache, activations and the CUDA
# context need room on top. vLLM and SGLang reserve ~90% of each GPU by default, and a serving
# engine wants at least ~20% of the weights again for KV cache to hold useful batches.
USABLE_GPU_FRACTION = 0.9
KV_AND_ACTIVATION_OVERHEAD = 1.2
GPUS_PER_NODE = 8
GIB = 1024**3
BYTES_PER_PARAMETER = {"BF16": 2.0, "FP8": 1.0, "4-bit": 0.5}
_PARAMETERS_IN_NAME = re.compile(r"(?<![A-Za-z0-9.])(\d+(?:\.\d+)?)\s*([BbMm])(?![A-Za-z])")


def parameters_from_name(model_name: str) -> float | None:
    """Total parameters in billions read from a name like ``Qwen3.5-35B-A3B`` (35), or None.

    The first size in the name is the total; a later ``A3B`` is the active count of a MoE.
    """
    match = _PARAMETERS_IN_NAME.search(model_name.rsplit("/", 1)[-1])
    if match is None:
        return None
    value = float(match.group(1))
    return value / 1000 if match.group(2) in "Mm" else value


@dataclass(frozen=True)
class Parallelism:
    """``tensor_parallel`` GPUs per model replica within a node, ``nodes`` such groups."""

    tensor_parallel: int
    nodes: int
    weights_gib: float
    needed_gib: float

    @property
    def gpus(self) -> int:
        return self.tensor_parallel * self.nodes


def suggest_parallelism(
    parameters_billion: float, bytes_per_parameter: float, gpu_memory_gib: float
) -> Parallelism:
    """The smallest power-of-two GPU count whose usable memory holds weights plus overhead."""
    if parameters_billion <= 0:
        raise CatalogError(f"model size {parameters_billion} B is invalid: enter the parameters")
    if gpu_memory_gib <= 0:
        raise CatalogError(f"GPU memory {gpu_memory_gib} GiB is invalid: enter each GPU's memory")
    weights_gib = parameters_billion * 1e9 * bytes_per_parameter / GIB
    needed_gib = weights_gib * KV_AND_ACTIVATION_OVERHEAD
    gpus = max(1, math.ceil(needed_gib / (gpu_memory_gib * USABLE_GPU_FRACTION)))
    gpus = 1 << (gpus - 1).bit_length()  # tensor parallelism splits attention heads evenly
    if gpus <= GPUS_PER_NODE:
        return Parallelism(gpus, 1, weights_gib, needed_gib)
    return Parallelism(GPUS_PER_NODE, gpus // GPUS_PER_NODE, weights_gib, needed_gib)


@dataclass(frozen=True)
class LaunchCommands:
    vllm: str
    sglang: str
    llama_server: str | None  # None: no GGUF to serve, or more GPUs than one machine has


def launch_commands(
    hub_model: str,
    parallelism: Parallelism,
    mtp_depth: int,
    *,
    gguf_repo: str | None = None,
    port: int = 8000,
) -> LaunchCommands:
    """The three commands for ``hub_model`` (the original release on the Hub)."""
    if mtp_depth < 1:
        raise CatalogError(f"MTP depth {mtp_depth} is invalid: draft at least 1 token per cycle")
    tp = parallelism.tensor_parallel
    # vLLM: https://docs.vllm.ai/en/v0.19.1/features/speculative_decoding/mtp/ (online example:
    # --tensor-parallel-size, --speculative-config '{"method":"mtp","num_speculative_tokens":K}');
    # several nodes add --pipeline-parallel-size (Ray cluster) per vLLM's parallelism docs.
    speculative = json.dumps({"method": "mtp", "num_speculative_tokens": mtp_depth})
    vllm = ["vllm", "serve", hub_model, "--tensor-parallel-size", str(tp)]
    if parallelism.nodes > 1:
        vllm += ["--pipeline-parallel-size", str(parallelism.nodes)]
    vllm += ["--speculative-config", speculative, "--host", "0.0.0.0", "--port", str(port)]
    # SGLang: https://docs.sglang.io/docs/advanced_features/speculative_decoding ("Multi Token
    # Prediction": --speculative-algorithm NEXTN with --speculative-num-steps,
    # --speculative-eagle-topk 1 and --speculative-num-draft-tokens = steps + 1); --tp spans all
    # GPUs, with --nnodes/--node-rank/--dist-init-addr on each node when there are several.
    sglang = ["python", "-m", "sglang.launch_server", "--model-path", hub_model]
    sglang += ["--tp", str(parallelism.gpus)]
    if parallelism.nodes > 1:
        sglang += ["--nnodes", str(parallelism.nodes), "--node-rank", "RANK"]
        sglang += ["--dist-init-addr", "HEAD_NODE:5000"]
    sglang += ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", str(mtp_depth)]
    sglang += ["--speculative-eagle-topk", "1"]
    sglang += ["--speculative-num-draft-tokens", str(mtp_depth + 1)]
    sglang += ["--host", "0.0.0.0", "--port", str(port)]
    # llama-server: flags from the vendored llama.cpp's common/arg.cpp (llama-cpp-python 0.3.36):
    # -hf <user>/<model>, --spec-type draft-mtp, --spec-draft-n-max N, -ngl, --split-mode.
    # It splits one model across the GPUs of one machine only.
    llama = None
    if gguf_repo is not None and parallelism.nodes == 1:
        llama_args = ["llama-server", "-hf", gguf_repo, "--spec-type", "draft-mtp"]
        llama_args += ["--spec-draft-n-max", str(mtp_depth), "-ngl", "999"]
        if tp > 1:
            llama_args += ["--split-mode", "layer"]
        llama_args += ["--host", "0.0.0.0", "--port", str(port), "--api-key", "YOUR_KEY"]
        llama = shlex.join(llama_args)
    return LaunchCommands(shlex.join(vllm), shlex.join(sglang), llama)
