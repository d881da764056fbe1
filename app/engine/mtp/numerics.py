"""The number formats of MTP checkpoints, decoded with lookup tables and rounded to BF16.

The formats and their rules: docs/formats.md#dequantisation.

Numpy has no FP8, E8M0 or BF16 types, so codes are decoded through 256-entry float32 tables and
BF16 is produced as uint16 bit patterns by round-to-nearest-even on the float32 bits.
"""

from __future__ import annotations

from functools import cache

import numpy as np

E8M0_NAN = 0xFF


def _fp8_e4m3fn_values() -> np.ndarray:
    """Value of every FP8 E4M3 (fn) code: bias 7, subnormals at exponent 0, 0x7F/0xFF NaN."""
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exponent = (codes >> 3) & 0x0F
    mantissa = codes & 0x07
    magnitude = np.where(
        exponent == 0,
        mantissa / 8.0 * 2.0**-6,
        (1.0 + mantissa / 8.0) * 2.0 ** (exponent - 7.0),
    )
    values = (sign * magnitude).astype(np.float32)
    values[(codes & 0x7F) == 0x7F] = np.nan
    return values


FP8_E4M3_VALUES = _fp8_e4m3fn_values()
INT8_VALUES = np.arange(256, dtype=np.uint8).view(np.int8).astype(np.float32)
CODE_VALUES = {"F8_E4M3": FP8_E4M3_VALUES, "I8": INT8_VALUES}
"""float32 value of each byte code, for the one-byte quantised dtypes."""

E8M0_VALUES = np.append(np.ldexp(np.float32(1.0), np.arange(255) - 127), np.nan).astype(np.float32)
"""2^(b − 127) for each E8M0 code; 0xFF is NaN (scales holding it are rejected upstream)."""


def f32_to_bf16_bits(values: np.ndarray) -> np.ndarray:
    """BF16 bit patterns (uint16) of float32 ``values``, rounded to nearest, ties to even.

    NaNs stay NaN (quiet, sign kept); overflow past the BF16 range rounds to ±inf as it should.
    """
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = bits >> 16
    rounded &= 1
    rounded += 0x7FFF
    rounded += bits
    rounded >>= 16
    result = rounded.astype(np.uint16)
    nan = np.isnan(values)
    if nan.any():
        result[nan] = ((bits[nan] >> 16) & 0x8000) | 0x7FC0
    return result


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    """Widen BF16 bit patterns (uint16) to float32 exactly."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def scaled_code_table(code_dtype: str, scales: np.ndarray) -> np.ndarray:
    """BF16 bits of code × scale for every (scale, code) pair: shape [len(scales) · 256].

    Entry ``i · 256 + code`` is the F32 product rounded once to BF16 — exactly what decoding the
    code, multiplying by scale ``i`` in F32 and rounding would give, for a table lookup's price.
    """
    with np.errstate(over="ignore", invalid="ignore"):  # ±inf and NaN are valid BF16 results
        products = CODE_VALUES[code_dtype][None, :] * scales.astype(np.float32)[:, None]
    return f32_to_bf16_bits(products).ravel()


@cache
def e8m0_code_table(code_dtype: str) -> np.ndarray:
    """:func:`scaled_code_table` over all E8M0 scales, indexed by ``scale_code · 256 + code``."""
    return scaled_code_table(code_dtype, E8M0_VALUES)
