"""Which elements of a quantised weight share which scale (mtp-formats.md §3, block layouts).

The scale tensor's shape is not trusted (checkpoints store it as [rows/B, cols/B], flat, or with
odd padding); only the scale *count* decides, with the 2D tiled layout tried before the 1D flat
one, as DeepSeek-style checkpoints need.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.engine.errors import ExtractError
from app.engine.mtp.header import StoredTensor

TILE_SIZES = (128, 64, 256, 32)


@dataclass(frozen=True)
class TiledBlocks:
    """A 2D weight [rows, cols] cut into tile×tile squares (edge tiles may be partial)."""

    tile: int
    rows: int
    cols: int

    @property
    def grid_cols(self) -> int:
        return -(-self.cols // self.tile)


@dataclass(frozen=True)
class FlatBlocks:
    """The flattened weight cut into runs of ``block`` consecutive elements, one scale each."""

    block: int


BlockLayout = TiledBlocks | FlatBlocks


def resolve_blocks(weight: StoredTensor, scale: StoredTensor, where: str = "") -> BlockLayout:
    """The layout matching ``scale``'s count; ``where`` (e.g. the source label) prefixes errors."""
    scale_count = scale.numel
    if len(weight.shape) == 2:
        rows, cols = weight.shape
        for tile in TILE_SIZES:
            if math.ceil(rows / tile) * math.ceil(cols / tile) == scale_count:
                return TiledBlocks(tile, rows, cols)
    if scale_count and weight.numel % scale_count == 0:
        return FlatBlocks(weight.numel // scale_count)
    prefix = f"{where}/{weight.shard}: " if where else ""
    raise ExtractError(
        f"{prefix}{weight.name} {list(weight.shape)} ({weight.numel} elements) has "
        f"{scale_count} scales in {scale.name}, which matches no block layout (2D tiles of "
        f"{TILE_SIZES} or equal 1D blocks); the checkpoint uses an unsupported quantisation — "
        "report it with the model name"
    )
