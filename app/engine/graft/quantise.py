"""The storage type of each grafted tensor, and its bytes, decided as llama.cpp's converter does.

The converter (``ModelBase.prepare_tensors``) keeps 1-D tensors, ``*_norm.weight``, biases and
MoE routers (``ffn_gate_inp``, ``ffn_gate_inp_shexp``) in F32 and stores everything else in the
output type, falling back to F16 when a row is not a whole number of quantisation blocks. The
bytes come from ``gguf.quants`` — llama.cpp's quantisation reference in numpy, the code the
converter itself calls — applied to row chunks (Q8_0 blocks never cross a row, so chunking
changes nothing).
"""

from __future__ import annotations

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, quants

HEAD_TYPES: dict[str, GGMLQuantizationType] = {
    "q8_0": GGMLQuantizationType.Q8_0,
    "f16": GGMLQuantizationType.F16,
    "bf16": GGMLQuantizationType.BF16,
}
"""``--head-type`` choices; Q8_0 is the default (what llama.cpp's converter writes for q8_0)."""

ALWAYS_F32_SUFFIXES = (".ffn_gate_inp.weight", ".ffn_gate_inp_shexp.weight")


def storage_type(name: str, shape: tuple[int, ...], head_type: str) -> GGMLQuantizationType:
    """The GGML type the converter would give tensor ``name`` of ``shape`` for ``head_type``."""
    if len(shape) <= 1 or name.endswith("_norm.weight"):
        return GGMLQuantizationType.F32
    if name.endswith(ALWAYS_F32_SUFFIXES) or not name.endswith(".weight"):
        return GGMLQuantizationType.F32
    wanted = HEAD_TYPES[head_type]
    block, _ = GGML_QUANT_SIZES[wanted]
    if shape[-1] % block:
        return GGMLQuantizationType.F16
    return wanted


def encode_rows(rows: np.ndarray, ggml_type: GGMLQuantizationType) -> bytes:
    """``rows`` (float32, rows × row length) in ``ggml_type``'s on-disk form."""
    if ggml_type == GGMLQuantizationType.F32:
        return np.ascontiguousarray(rows, dtype="<f4").tobytes()
    return np.ascontiguousarray(quants.quantize(rows, ggml_type)).tobytes()


def stored_nbytes(shape: tuple[int, ...], ggml_type: GGMLQuantizationType) -> int:
    block, size = GGML_QUANT_SIZES[ggml_type]
    elements = 1
    for dim in shape:
        elements *= dim
    return elements // block * size
