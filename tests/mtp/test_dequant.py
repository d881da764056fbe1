"""Number formats and block layouts (docs/formats.md#dequantisation) vs an independent reference."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from app.engine.errors import ExtractError
from app.engine.mtp import LocalFolderSource, MtpTensor, StoredTensor, detect_mtp
from app.engine.mtp.blocks import FlatBlocks, TiledBlocks, resolve_blocks
from app.engine.mtp.dequant import Scales, decode_tensor
from app.engine.mtp.numerics import (
    E8M0_VALUES,
    FP8_E4M3_VALUES,
    e8m0_code_table,
    f32_to_bf16_bits,
)
from app.engine.mtp.readplan import plan_runs
from tests.mtp.checkpoints import SyntheticCheckpoint, fp8_e4m3_value
from tests.mtp.reference import bf16_bits, round_to_f32


def test_fp8_table_decodes_every_code_like_the_bit_field_definition() -> None:
    for code in range(256):
        expected = fp8_e4m3_value(code)
        if math.isnan(expected):
            assert math.isnan(FP8_E4M3_VALUES[code]), hex(code)
        else:
            assert FP8_E4M3_VALUES[code] == expected, hex(code)
    assert FP8_E4M3_VALUES[0x7E] == 448.0  # max finite, no infinity
    assert FP8_E4M3_VALUES[0x01] == 2.0**-9  # smallest subnormal


def test_e8m0_values_are_powers_of_two() -> None:
    assert [E8M0_VALUES[b] for b in (0, 126, 127, 128, 254)] == [
        2.0**-127,
        0.5,
        1.0,
        2.0,
        2.0**127,
    ]


@pytest.mark.parametrize(
    ("value", "bits"),
    [
        (1.0, 0x3F80),
        (1.0 + 2**-8, 0x3F80),  # tie, even stays
        (1.0 + 3 * 2**-8, 0x3F82),  # tie, odd rounds up to even
        (1.0 + 2**-8 + 2**-20, 0x3F81),  # just above the tie
        (-2.5, 0xC020),
        (3.4e38, 0x7F80),  # rounds past the largest BF16 to +inf
        (float("inf"), 0x7F80),
        (2.0**-130, 0x0008),  # F32 subnormal
    ],
)
def test_bf16_round_to_nearest_even(value: float, bits: int) -> None:
    assert int(f32_to_bf16_bits(np.array([value], dtype=np.float32))[0]) == bits
    assert bf16_bits(round_to_f32(value)) == bits


def test_bf16_keeps_nan_even_with_a_low_payload() -> None:
    nan_low_payload = struct.unpack("<f", struct.pack("<I", 0xFF800001))[0]
    result = f32_to_bf16_bits(np.array([nan_low_payload, np.nan], dtype=np.float32))
    assert [int(b) for b in result] == [0xFFC0, 0x7FC0]


def test_e8m0_table_is_code_times_scale_rounded_once() -> None:
    table = e8m0_code_table("F8_E4M3")
    for scale_code in (0, 1, 100, 127, 140, 254):
        for code in (0x00, 0x01, 0x07, 0x08, 0x3B, 0x7E, 0x80, 0x81, 0xFE):
            product = fp8_e4m3_value(code) * 2.0 ** (scale_code - 127)
            expected = bf16_bits(round_to_f32(product)) if abs(product) < 3.4e38 else None
            if expected is not None:
                assert table[scale_code * 256 + code] == expected, (scale_code, hex(code))


def _tensor(shape: tuple[int, ...], dtype: str = "F8_E4M3") -> StoredTensor:
    size = math.prod(shape)
    return StoredTensor("w.weight", "s", dtype, shape, 0, size)


def _scale(count: int, dtype: str = "F32") -> StoredTensor:
    width = {"F32": 4, "BF16": 2, "F8_E8M0": 1}[dtype]
    return StoredTensor("w.weight_scale_inv", "s", dtype, (count,), 0, count * width)


def test_block_layout_prefers_2d_tiles_and_handles_partial_edges() -> None:
    # DeepSeek V3.2's [7168, 576] weight has 56 · 5 = 280 scales: 128-tiles, last column partial.
    assert resolve_blocks(_tensor((7168, 576)), _scale(280)) == TiledBlocks(128, 7168, 576)
    assert resolve_blocks(_tensor((200, 192)), _scale(12)) == TiledBlocks(64, 200, 192)
    # Per-row scales on short rows match no tile grid: 1D blocks of one row each.
    assert resolve_blocks(_tensor((96, 200)), _scale(96)) == FlatBlocks(200)
    assert resolve_blocks(_tensor((4, 48, 64)), _scale(4)) == FlatBlocks(3072)


def test_block_layout_error_names_tensor_shape_and_count() -> None:
    with pytest.raises(ExtractError, match=r"w\.weight \[200, 300\].*7 scales"):
        resolve_blocks(_tensor((200, 300)), _scale(7))


@pytest.mark.parametrize("target", [1, 7, 64, 1000, 5000, 1 << 18])
@pytest.mark.parametrize("name", ["deepseek-v3", "mixed-formats", "qwen36-fp8"])
@pytest.mark.slow
def test_piece_size_never_changes_the_result(
    name: str, target: int, checkpoints: dict[str, SyntheticCheckpoint]
) -> None:
    """Row segments, partial tile rows and slices of one block decode like whole tensors."""
    checkpoint = checkpoints[name]
    detection = detect_mtp(LocalFolderSource(checkpoint.folder))
    for item in detection.tensors:
        if target < 64 and (item.scale is None or item.tensor.numel > 40_000):
            continue  # one-element pieces of big or plain tensors add time, not coverage
        got = _decode(checkpoint, item, target)
        assert got == _decode(checkpoint, item, 1 << 30), (item.name, target)


def _decode(checkpoint: SyntheticCheckpoint, item: MtpTensor, target: int) -> bytes:
    data = memoryview(checkpoint.stored[item.name])
    position = 0

    def take(count: int) -> memoryview:
        nonlocal position
        position += count
        return data[position - count : position]

    scales = Scales.parse(item, checkpoint.stored[item.scale.name], "test") if item.scale else None
    pieces = b"".join(bytes(p) for p in decode_tensor(item, scales, take, target))
    assert position == len(data)
    return pieces


def _stored(name: str, shard: str, start: int, size: int) -> StoredTensor:
    return StoredTensor(name, shard, "BF16", (size // 2,), start, start + size)


def test_read_runs_bridge_the_smallest_gaps_within_the_budget() -> None:
    tensors = [
        _stored("a", "s1", 100, 1000),
        _stored("b", "s1", 1100, 1000),  # adjacent to a
        _stored("c", "s1", 2150, 1000),  # 50-byte gap
        _stored("d", "s1", 3400, 1000),  # 250-byte gap
        _stored("e", "s2", 0, 1000),  # other shard: never merged
    ]
    runs = plan_runs(reversed(tensors), waste_budget=100)
    assert [(r.shard, r.start, r.end, [t.name for t in r.tensors]) for r in runs] == [
        ("s1", 100, 3150, ["a", "b", "c"]),
        ("s1", 3400, 4400, ["d"]),
        ("s2", 0, 1000, ["e"]),
    ]
    assert sum(r.wasted for r in runs) == 50
    assert len(plan_runs(tensors, waste_budget=10_000)) == 2
