"""Turning one stored MTP tensor into BF16, a bounded piece at a time.

A decoder pulls the tensor's stored bytes through ``take(n)`` in pieces of about
``target_elements`` elements and yields each piece's BF16 bytes, so memory stays near one piece
whatever the tensor's size. Quantised codes are decoded with one table lookup per element: for
each scale, a 256-entry table holds ``bf16_rne(f32(code value × scale))`` for every code, which is
bit-identical to decoding, multiplying in F32 and rounding once, at a fraction of the cost. Pieces
are cut so that their scales' tables are cheap to build (a tile row, a run of whole blocks, or part
of one block). Only F32/BF16 scales over tiny 1D blocks, where tables would outweigh the data,
take the plain decode-multiply-round path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from app.engine.errors import ExtractError
from app.engine.mtp.blocks import FlatBlocks, TiledBlocks
from app.engine.mtp.detect import MtpTensor
from app.engine.mtp.header import StoredTensor
from app.engine.mtp.numerics import (
    CODE_VALUES,
    E8M0_NAN,
    bf16_bits_to_f32,
    e8m0_code_table,
    f32_to_bf16_bits,
    scaled_code_table,
)

Take = Callable[[int], memoryview]
"""Returns exactly the next ``n`` stored bytes of the tensor being decoded."""
Buffer = memoryview | np.ndarray

DEFAULT_PIECE_ELEMENTS = 1 << 18
SMALL_BLOCK = 1024
"""Below this many elements per F32/BF16 scale, per-block tables cost more than they save."""


def decode_tensor(
    item: MtpTensor,
    scales: Scales | None,
    take: Take,
    target_elements: int = DEFAULT_PIECE_ELEMENTS,
) -> Iterator[Buffer]:
    """Yield the BF16 bytes of ``item`` in order, pulling its stored bytes through ``take``."""
    tensor = item.tensor
    if tensor.numel == 0:
        return iter(())
    if item.scale is None:
        return _decode_plain(tensor, take, target_elements)
    assert scales is not None and item.blocks is not None
    if isinstance(item.blocks, TiledBlocks):
        return _decode_tiled(tensor.dtype, item.blocks, scales, take, target_elements)
    if scales.codes is None and item.blocks.block < SMALL_BLOCK:
        return _decode_small_blocks(tensor, item.blocks, scales, take, target_elements)
    return _decode_flat(tensor, item.blocks, scales, take, target_elements)


@dataclass(frozen=True)
class Scales:
    """A weight's scales, checked: E8M0 codes (table-indexed) or finite F32 values."""

    codes: np.ndarray | None
    values: np.ndarray | None

    @classmethod
    def parse(cls, item: MtpTensor, data: bytes, where: str) -> Scales:
        """Decode ``item``'s scale bytes; ``where`` (the source label) prefixes errors."""
        scale = item.scale
        assert scale is not None
        if scale.dtype == "F8_E8M0":
            codes = np.frombuffer(data, dtype=np.uint8)
            bad = np.flatnonzero(codes == E8M0_NAN)
            if bad.size:
                raise _bad_scale(where, item, scale, int(bad[0]), "0xFF (NaN)")
            return cls(codes, None)
        if scale.dtype == "F32":
            values = np.frombuffer(data, dtype="<f4")
        else:
            values = bf16_bits_to_f32(np.frombuffer(data, dtype="<u2"))
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            raise _bad_scale(where, item, scale, int(bad[0]), str(values[bad[0]]))
        return cls(None, values)

    def table_and_offsets(
        self, code_dtype: str, first: int, count: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """A lookup table and, for scales ``first … first+count-1``, each one's table offset."""
        if self.codes is not None:
            offsets = self.codes[first : first + count].astype(np.intp) << 8
            return e8m0_code_table(code_dtype), offsets
        assert self.values is not None
        table = scaled_code_table(code_dtype, self.values[first : first + count])
        return table, np.arange(count, dtype=np.intp) << 8

    def values_of(self, first: int, count: int) -> np.ndarray:
        assert self.values is not None, "E8M0 scales always take the table path"
        return self.values[first : first + count]


def _bad_scale(
    where: str, item: MtpTensor, scale: StoredTensor, index: int, value: str
) -> ExtractError:
    return ExtractError(
        f"{where}/{scale.shard}: scale tensor {scale.name} (for {item.name}) holds {value} at "
        f"index {index}; the checkpoint is corrupt — re-download this shard"
    )


def _decode_plain(tensor: StoredTensor, take: Take, target: int) -> Iterator[Buffer]:
    itemsize = {"BF16": 2, "F16": 2, "F32": 4}[tensor.dtype]
    remaining = tensor.numel
    while remaining:
        count = min(target, remaining)
        remaining -= count
        data = take(count * itemsize)
        if tensor.dtype == "BF16":
            yield data
        elif tensor.dtype == "F16":
            yield f32_to_bf16_bits(np.frombuffer(data, dtype="<f2").astype(np.float32))
        else:
            yield f32_to_bf16_bits(np.frombuffer(data, dtype="<f4"))


def _decode_tiled(
    code_dtype: str, blocks: TiledBlocks, scales: Scales, take: Take, target: int
) -> Iterator[Buffer]:
    """Rows of one tile row at a time (or row segments when one row exceeds the target)."""
    tile, rows, cols = blocks.tile, blocks.rows, blocks.cols
    tiles_across = blocks.grid_cols
    rows_per_piece = max(1, min(tile, target // max(cols, 1)))
    segment = min(cols, target)
    index = np.empty(rows_per_piece * segment, dtype=np.intp)
    for tile_row_start in range(0, rows, tile):
        table, offsets = scales.table_and_offsets(
            code_dtype, (tile_row_start // tile) * tiles_across, tiles_across
        )
        column_offsets = np.repeat(offsets, tile)[:cols]
        tile_row_end = min(tile_row_start + tile, rows)
        for row in range(tile_row_start, tile_row_end, rows_per_piece):
            height = min(rows_per_piece, tile_row_end - row)
            for col in range(0, cols, segment):
                width = min(segment, cols - col)
                codes = np.frombuffer(take(height * width), dtype=np.uint8).reshape(height, width)
                piece_index = index[: height * width].reshape(height, width)
                np.add(codes, column_offsets[col : col + width], out=piece_index, dtype=np.intp)
                yield np.take(table, piece_index)


def _decode_flat(
    tensor: StoredTensor, blocks: FlatBlocks, scales: Scales, take: Take, target: int
) -> Iterator[Buffer]:
    """Whole blocks per piece, or slices of one block when a block exceeds the target."""
    block = blocks.block
    block_count = tensor.numel // block
    if block >= target:
        index = np.empty(target, dtype=np.intp)
        for block_number in range(block_count):
            table, offsets = scales.table_and_offsets(tensor.dtype, block_number, 1)
            for start in range(0, block, target):
                count = min(target, block - start)
                codes = np.frombuffer(take(count), dtype=np.uint8)
                np.add(codes, offsets[0], out=index[:count], dtype=np.intp)
                yield np.take(table, index[:count])
        return
    blocks_per_piece = target // block
    index = np.empty(blocks_per_piece * block, dtype=np.intp)
    for first in range(0, block_count, blocks_per_piece):
        count = min(blocks_per_piece, block_count - first)
        table, offsets = scales.table_and_offsets(tensor.dtype, first, count)
        codes = np.frombuffer(take(count * block), dtype=np.uint8).reshape(count, block)
        piece_index = index[: count * block].reshape(count, block)
        np.add(codes, offsets[:, None], out=piece_index, dtype=np.intp)
        yield np.take(table, piece_index)


def _decode_small_blocks(
    tensor: StoredTensor, blocks: FlatBlocks, scales: Scales, take: Take, target: int
) -> Iterator[Buffer]:
    """Decode, multiply by each block's F32 scale, round once: F32/BF16 scales on tiny blocks."""
    block = blocks.block
    block_count = tensor.numel // block
    blocks_per_piece = max(1, target // block)
    code_values = CODE_VALUES[tensor.dtype]
    for first in range(0, block_count, blocks_per_piece):
        count = min(blocks_per_piece, block_count - first)
        codes = np.frombuffer(take(count * block), dtype=np.uint8).reshape(count, block)
        values = code_values[codes]
        with np.errstate(over="ignore", invalid="ignore"):
            values *= scales.values_of(first, count)[:, None]
        yield f32_to_bf16_bits(values)
