"""An extraction that succeeds with wrong values is the worst failure: shapes decide, or it refuses.

Tiny single-file checkpoints with real ``safetensors`` files. A per-channel FP8 weight
(compressed-tensors "channel" strategy: ``weight_scale`` [out, 1]) must decode bit-exactly even
though its scale count also fits a 64×64 tile grid; a flat scale that fits two layouts is refused;
an I8 tensor that is really packed FP4 is refused instead of decoded as INT8.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from app.engine.errors import ExtractError
from app.engine.mtp import LocalFolderSource, extract_mtp
from tests.mtp.checkpoints import fp8_e4m3_value, to_bf16_bits, write_shard

FP8_VALUES = np.array([fp8_e4m3_value(code) for code in range(256)], dtype=np.float32)
WEIGHT = "mtp.layers.0.mlp.down_proj.weight"
NORM = "mtp.norm.weight"
ROWS, COLS = 128, 4096


def fp8_codes(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    codes = rng.integers(0, 256, size=shape, dtype=np.uint8)
    return np.where((codes & 0x7F) == 0x7F, 0x00, codes).astype(np.uint8)  # no NaN codes


def write_single_file(
    folder: Path, tensors: dict[str, tuple[str, tuple[int, ...], bytes]], config: dict
) -> Path:
    folder.mkdir(parents=True)
    write_shard(folder / "model.safetensors", tensors)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def norm_tensor(size: int) -> tuple[str, tuple[int, ...], bytes]:
    return ("BF16", (size,), to_bf16_bits(np.ones(size, dtype=np.float32)).tobytes())


def expected_bf16(codes: np.ndarray, per_element_scale: np.ndarray) -> np.ndarray:
    """Decode, multiply in F32, round once to BF16 (docs/formats.md#dequantisation)."""
    return to_bf16_bits(FP8_VALUES[codes] * per_element_scale.astype(np.float32))


def extracted_bits(folder: Path, out: Path, name: str) -> np.ndarray:
    """The BF16 bits of ``name`` in the sidecar, read straight from the file's header offsets."""
    extract_mtp(LocalFolderSource(folder), out)
    data = out.read_bytes()
    length = int.from_bytes(data[:8], "little")
    entry = json.loads(data[8 : 8 + length])[name]
    assert entry["dtype"] == "BF16"
    begin, end = entry["data_offsets"]
    return np.frombuffer(data[8 + length + begin : 8 + length + end], dtype="<u2")


def test_per_channel_fp8_scales_shaped_out_by_1_decode_bit_exactly(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    codes = fp8_codes(rng, (ROWS, COLS))
    scales = rng.uniform(1e-4, 2e-2, size=(ROWS, 1)).astype(np.float32)
    folder = write_single_file(
        tmp_path / "ckpt",
        {
            WEIGHT: ("F8_E4M3", (ROWS, COLS), codes.tobytes()),
            f"{WEIGHT}_scale": ("F32", (ROWS, 1), scales.tobytes()),
            NORM: norm_tensor(COLS),
        },
        {"mtp_num_hidden_layers": 1},
    )
    got = extracted_bits(folder, tmp_path / "mtp.safetensors", WEIGHT)
    want = expected_bf16(codes, np.broadcast_to(scales, (ROWS, COLS)))
    assert int(np.count_nonzero(got.reshape(ROWS, COLS) != want)) == 0


def test_group_scales_shaped_out_by_groups_decode_bit_exactly(tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    codes = fp8_codes(rng, (ROWS, COLS))
    scales = rng.uniform(1e-4, 2e-2, size=(ROWS, COLS // 128)).astype(np.float32)
    folder = write_single_file(
        tmp_path / "ckpt",
        {
            WEIGHT: ("F8_E4M3", (ROWS, COLS), codes.tobytes()),
            f"{WEIGHT}_scale": ("F32", scales.shape, scales.tobytes()),
            NORM: norm_tensor(COLS),
        },
        {"mtp_num_hidden_layers": 1},
    )
    got = extracted_bits(folder, tmp_path / "mtp.safetensors", WEIGHT)
    want = expected_bf16(codes, np.repeat(scales, 128, axis=1))
    assert int(np.count_nonzero(got.reshape(ROWS, COLS) != want)) == 0


def test_a_flat_scale_that_fits_tiles_and_rows_is_refused_as_ambiguous(tmp_path: Path) -> None:
    rng = np.random.default_rng(9)
    codes = fp8_codes(rng, (ROWS, COLS))
    scales = rng.uniform(1e-4, 2e-2, size=(ROWS,)).astype(np.float32)
    folder = write_single_file(
        tmp_path / "ckpt",
        {
            WEIGHT: ("F8_E4M3", (ROWS, COLS), codes.tobytes()),
            f"{WEIGHT}_scale": ("F32", (ROWS,), scales.tobytes()),
            NORM: norm_tensor(COLS),
        },
        {"mtp_num_hidden_layers": 1},
    )
    out = tmp_path / "out" / "mtp.safetensors"
    out.parent.mkdir()
    with pytest.raises(ExtractError) as caught:
        extract_mtp(LocalFolderSource(folder), out)
    message = str(caught.value)
    assert WEIGHT in message and "[128, 4096]" in message and "[128]" in message
    assert "64×64 tiles" in message and "runs of 4096" in message
    assert list(out.parent.iterdir()) == []


def test_a_2d_scale_whose_shape_fits_no_layout_is_refused(tmp_path: Path) -> None:
    rng = np.random.default_rng(10)
    codes = fp8_codes(rng, (ROWS, COLS))
    scales = np.ones((1, COLS), dtype=np.float32)  # per input column: not a supported layout
    folder = write_single_file(
        tmp_path / "ckpt",
        {
            WEIGHT: ("F8_E4M3", (ROWS, COLS), codes.tobytes()),
            f"{WEIGHT}_scale": ("F32", (1, COLS), scales.tobytes()),
            NORM: norm_tensor(COLS),
        },
        {"mtp_num_hidden_layers": 1},
    )
    with pytest.raises(ExtractError, match=r"\[1, 4096\].*neither one scale per run"):
        extract_mtp(LocalFolderSource(folder), tmp_path / "mtp.safetensors")
    assert not (tmp_path / "mtp.safetensors").exists()


EXPERT = "mtp.0.ffn.experts.0.w1.weight"
EXPERT_SCALE = "mtp.0.ffn.experts.0.w1.scale"
HIDDEN, FFN = 128, 96


@pytest.mark.parametrize(
    ("ffn", "scale_group", "reason"),
    [
        (FFN, 32, "half of hidden_size = 128"),  # the row is half the declared input size
        (HIDDEN // 2, 16, "covers 16 bytes, half of an MX block"),  # widths coincide: scales tell
    ],
)
def test_packed_fp4_experts_stored_as_i8_are_refused_not_decoded_as_int8(
    tmp_path: Path, ffn: int, scale_group: int, reason: str
) -> None:
    rng = np.random.default_rng(11)
    packed = rng.integers(-128, 128, size=(ffn, HIDDEN // 2), dtype=np.int8)
    scales = np.full((ffn, HIDDEN // 2 // scale_group), 127, dtype=np.uint8)  # E8M0 2^0
    folder = write_single_file(
        tmp_path / "ckpt",
        {
            EXPERT: ("I8", packed.shape, packed.tobytes()),
            EXPERT_SCALE: ("F8_E8M0", scales.shape, scales.tobytes()),
            "mtp.0.norm.weight": norm_tensor(HIDDEN),
        },
        {"hidden_size": HIDDEN, "moe_intermediate_size": ffn},
    )
    with pytest.raises(ExtractError) as caught:
        extract_mtp(LocalFolderSource(folder), tmp_path / "mtp.safetensors")
    message = str(caught.value)
    assert EXPERT in message and f"I8 [{ffn}, 64]" in message
    assert reason in message and "packed 4-bit" in message
    assert not (tmp_path / "mtp.safetensors").exists()


def test_int8_experts_of_the_full_width_still_extract_exactly(tmp_path: Path) -> None:
    rng = np.random.default_rng(12)
    codes = rng.integers(-128, 128, size=(FFN, HIDDEN), dtype=np.int8)
    exponents = rng.integers(120, 130, size=(FFN, HIDDEN // 32), dtype=np.uint8)
    folder = write_single_file(
        tmp_path / "ckpt",
        {
            EXPERT: ("I8", codes.shape, codes.tobytes()),
            EXPERT_SCALE: ("F8_E8M0", exponents.shape, exponents.tobytes()),
            "mtp.0.norm.weight": norm_tensor(HIDDEN),
        },
        {"hidden_size": HIDDEN, "moe_intermediate_size": FFN},
    )
    got = extracted_bits(folder, tmp_path / "mtp.safetensors", EXPERT)
    scale = np.repeat(np.exp2(exponents.astype(np.float32) - 127), 32, axis=1)
    want = to_bf16_bits(codes.astype(np.float32) * scale)
    assert int(np.count_nonzero(got.reshape(FFN, HIDDEN) != want)) == 0
