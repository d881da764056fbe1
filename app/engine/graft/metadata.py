"""The metadata of the grafted file: the base's entries, with the block count and layer arrays
grown by the MTP block(s) and ``nextn_predict_layers`` set.

Only what llama.cpp's converter writes differently for a model with MTP changes:
``{arch}.block_count`` counts the MTP blocks, ``{arch}.nextn_predict_layers`` says how many there
are, and every per-layer array (one item per block, e.g. ``attention.recurrent_layers`` or
per-layer head counts) gets one item per MTP block. An MTP block is a full-attention block, so
its recurrent flag is false and its other per-layer values are those of the trunk's last
attention block. Every other entry is copied byte for byte.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from gguf import GGUFValueType

from app.engine.graft.gguf_layout import SCALAR_FORMATS, GgufLayout

FIXED_LENGTH_ARRAYS = ("rope.dimension_sections",)
"""Arrays that are not per layer even when their length happens to equal the block count."""


@dataclass(frozen=True)
class NewEntry:
    key: str
    value_type: int
    value: Any
    item_type: int | None = None


@dataclass(frozen=True)
class MetadataPlan:
    replaced: dict[str, NewEntry]
    """Base entries written anew (same position in the key list)."""
    appended: tuple[NewEntry, ...]
    """Entries the base lacks, written after the base's own."""
    extended_arrays: tuple[str, ...]


def plan_metadata(
    layout: GgufLayout, old_blocks: int, trunk_blocks: int, head_blocks: int
) -> MetadataPlan:
    """What changes when ``head_blocks`` MTP blocks follow ``trunk_blocks`` trunk blocks (the
    base had ``old_blocks`` in all, more than the trunk when an old head is replaced)."""
    arch = layout.architecture
    block_key, nextn_key = f"{arch}.block_count", f"{arch}.nextn_predict_layers"
    block_entry = layout.entry(block_key)
    assert block_entry is not None
    replaced = {block_key: NewEntry(block_key, block_entry.value_type, trunk_blocks + head_blocks)}
    appended: list[NewEntry] = []
    nextn_entry = layout.entry(nextn_key)
    if nextn_entry is None:
        appended.append(NewEntry(nextn_key, GGUFValueType.UINT32, head_blocks))
    else:
        replaced[nextn_key] = NewEntry(nextn_key, nextn_entry.value_type, head_blocks)
    recurrent = layout.value(f"{arch}.attention.recurrent_layers")
    attention_block = _last_attention_block(recurrent, trunk_blocks)
    extended: list[str] = []
    for entry in layout.entries:
        if (
            entry.value_type != GGUFValueType.ARRAY
            or not isinstance(entry.value, list)
            or len(entry.value) != old_blocks
            or not entry.key.startswith(f"{arch}.")
            or entry.key.endswith(FIXED_LENGTH_ARRAYS)
        ):
            continue
        trunk = entry.value[:trunk_blocks]
        if entry.key.endswith(".attention.recurrent_layers"):
            fill: Any = False
        else:
            fill = trunk[attention_block]
        replaced[entry.key] = NewEntry(
            entry.key, entry.value_type, trunk + [fill] * head_blocks, entry.item_type
        )
        extended.append(entry.key)
    return MetadataPlan(replaced, tuple(appended), tuple(extended))


def _last_attention_block(recurrent: Any, trunk_blocks: int) -> int:
    if isinstance(recurrent, list) and len(recurrent) >= trunk_blocks:
        for index in range(trunk_blocks - 1, -1, -1):
            if not recurrent[index]:
                return index
    return trunk_blocks - 1


def encode_entry(entry: NewEntry) -> bytes:
    """The GGUF bytes of a key/value pair (little-endian)."""
    key = entry.key.encode("utf-8")
    head = struct.pack("<Q", len(key)) + key + struct.pack("<I", entry.value_type)
    return head + _encode_value(entry.value_type, entry.value, entry.item_type)


def _encode_value(value_type: int, value: Any, item_type: int | None) -> bytes:
    if value_type in SCALAR_FORMATS:
        return struct.pack("<" + SCALAR_FORMATS[value_type], value)
    if value_type == GGUFValueType.STRING:
        data = str(value).encode("utf-8")
        return struct.pack("<Q", len(data)) + data
    if value_type == GGUFValueType.ARRAY and item_type is not None:
        items = b"".join(_encode_value(item_type, item, None) for item in value)
        return struct.pack("<IQ", item_type, len(value)) + items
    raise ValueError(f"cannot encode a metadata value of type {value_type}")
