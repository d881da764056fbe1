"""A slow, obviously-correct decoder to check the extractor's output bit for bit.

Element by element, in plain Python floats: decode the code from its bit fields, decode the scale
from its stored bytes, multiply (exact in double, then rounded once to F32 as F32 arithmetic
would), round the F32 to BF16 to nearest-even with integer arithmetic. It shares no code with
app.engine.mtp; the block each element belongs to comes from how the builder quantised it, not
from the extractor's layout resolution.
"""

from __future__ import annotations

import math
import struct

import numpy as np

from tests.mtp.checkpoints import StoredQuant, SyntheticCheckpoint, fp8_e4m3_value


def f32_bits(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", value))[0]


def round_to_f32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


def bf16_bits(value: float) -> int:
    """BF16 of an F32-representable value, round to nearest, ties to even."""
    bits = f32_bits(value)
    if math.isnan(value):
        return ((bits >> 16) & 0x8000) | 0x7FC0
    upper, lower = bits >> 16, bits & 0xFFFF
    if lower > 0x8000 or (lower == 0x8000 and upper & 1):
        upper += 1
    return upper


def _scale_values(stored: StoredQuant) -> list[float]:
    raw, dtype = stored.scale_raw, stored.quant.scale_dtype
    if dtype == "F8_E8M0":
        return [2.0 ** (b - 127) for b in raw]
    if dtype == "BF16":
        return [
            struct.unpack("<f", struct.pack("<I", b << 16))[0]
            for (b,) in struct.iter_unpack("<H", raw)
        ]
    return [v for (v,) in struct.iter_unpack("<f", raw)]


def _code_value(code: int, code_dtype: str) -> float:
    if code_dtype == "F8_E4M3":
        return fp8_e4m3_value(code)
    return float(code - 256 if code >= 128 else code)


def reference_bf16(checkpoint: SyntheticCheckpoint, name: str) -> np.ndarray:
    """The BF16 bits (uint16, flat) the sidecar must hold for tensor ``name``."""
    stored = checkpoint.quantised.get(name)
    if stored is None:
        return np.array(
            [bf16_bits(float(v)) for v in checkpoint.originals[name].ravel()], np.uint16
        )
    scales = _scale_values(stored)
    codes = stored.codes
    quant = stored.quant
    out = np.empty(codes.size, dtype=np.uint16)
    cache: dict[tuple[int, int], int] = {}
    for flat, code in enumerate(codes.ravel().tolist()):
        if quant.tile:
            cols = codes.shape[1]
            row, col = divmod(flat, cols)
            scale_index = (row // quant.tile) * math.ceil(cols / quant.tile) + col // quant.tile
        else:
            assert quant.block
            scale_index = flat // quant.block
        key = (code, scale_index)
        if key not in cache:
            product = _code_value(code, quant.code) * scales[scale_index]
            cache[key] = bf16_bits(round_to_f32(product))
        out[flat] = cache[key]
    return out
