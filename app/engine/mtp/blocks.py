"""Which elements of a quantised weight share which scale
(docs/formats.md#block-layouts-of-the-scales).

The scale tensor's *shape* decides, not just its count: a count alone is often matched by two
layouts that mean different things (a [128, 4096] weight with 128 scales is 64×64 tiles *or* one
scale per row), and picking the wrong one gives a sidecar full of wrong values that looks fine.

* a single scale: the whole tensor;
* a scale shaped like the weight with a shorter last axis (``[out, 1]`` per channel, ``[out,
  in/g]`` per group of ``g``): runs of the last axis — 1D blocks along each row;
* a 2D scale ``[ceil(rows/B), ceil(cols/B)]`` for B in :data:`TILE_SIZES`: B×B tiles;
* a flat (1D) scale: the 2D tiled layout or 1D blocks by count — refused as ambiguous when both
  fit with row-aligned blocks, since nothing then says which one the quantiser used.

Anything else is refused with the shapes in the message.
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
    """The layout ``scale``'s shape describes; ``where`` (e.g. the source label) prefixes errors."""
    prefix = f"{where}/{weight.shard}: " if where else ""
    described = (
        f"{prefix}{weight.name} {list(weight.shape)} ({weight.numel} elements) has "
        f"{scale.numel} scales in {scale.name} {list(scale.shape)}"
    )
    if scale.numel == 1:
        return FlatBlocks(weight.numel)
    if len(scale.shape) == len(weight.shape) >= 2:
        if groups := _row_groups(weight.shape, scale.shape):
            return FlatBlocks(groups)
        if len(weight.shape) == 2 and (tile := _tile_for_shape(weight.shape, scale.shape)):
            return TiledBlocks(tile, *weight.shape)
        raise ExtractError(
            f"{described}, which is neither one scale per run of the last axis (shape "
            f"{list(weight.shape[:-1])} + [k]) nor 2D tiles of {TILE_SIZES}; the checkpoint uses "
            "an unsupported quantisation — report it with the model name"
        )
    if len(scale.shape) > 1:
        raise ExtractError(
            f"{described}: a {len(scale.shape)}D scale for a {len(weight.shape)}D weight matches "
            "no known block layout — report it with the model name"
        )
    return _layout_from_count(weight, scale.numel, described)


def _row_groups(weight_shape: tuple[int, ...], scale_shape: tuple[int, ...]) -> int | None:
    """Elements per scale when the scale has the weight's shape but a shorter last axis."""
    if scale_shape[:-1] != weight_shape[:-1] or scale_shape[-1] == 0:
        return None
    if weight_shape[-1] % scale_shape[-1]:
        return None
    return weight_shape[-1] // scale_shape[-1]


def _tile_for_shape(weight_shape: tuple[int, ...], scale_shape: tuple[int, ...]) -> int | None:
    rows, cols = weight_shape
    for tile in TILE_SIZES:
        if (math.ceil(rows / tile), math.ceil(cols / tile)) == scale_shape:
            return tile
    return None


def _layout_from_count(weight: StoredTensor, count: int, described: str) -> BlockLayout:
    """A flat scale: tiles or 1D blocks by count, refusing when both are plausible."""
    tiled: TiledBlocks | None = None
    if len(weight.shape) == 2:
        rows, cols = weight.shape
        tiled = next(
            (
                TiledBlocks(tile, rows, cols)
                for tile in TILE_SIZES
                if math.ceil(rows / tile) * math.ceil(cols / tile) == count
            ),
            None,
        )
    flat = FlatBlocks(weight.numel // count) if count and weight.numel % count == 0 else None
    if tiled and flat and _row_aligned(flat.block, weight.shape[-1]):
        raise ExtractError(
            f"{described}: that count fits {tiled.tile}×{tiled.tile} tiles and also runs of "
            f"{flat.block} elements, and a flat scale does not say which; the values would be "
            "wrong under the other one, so nothing is extracted — report it with the model name"
        )
    if tiled or flat:
        return tiled or flat  # type: ignore[return-value]
    raise ExtractError(
        f"{described}, which matches no block layout (2D tiles of {TILE_SIZES} or equal 1D "
        "blocks); the checkpoint uses an unsupported quantisation — report it with the model name"
    )


def _row_aligned(block: int, row: int) -> bool:
    """Blocks a quantiser would use: whole rows, or an equal split of each row."""
    return block % row == 0 or row % block == 0
