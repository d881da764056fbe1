"""Reading and validating a safetensors header by byte ranges, without loading the file.

A shard is 8 bytes of little-endian header length, a JSON header mapping tensor names to dtype,
shape and ``data_offsets`` (relative to the end of the header), then the data. Extraction trusts
these offsets to read tensors by range, so every entry is checked against the file size before a
single tensor byte is read: a corrupt or truncated shard must fail with a message naming the file
and tensor, never produce a wrong sidecar. The header itself is untrusted too: its length is
checked against the file before it is read, JSON nested too deep or holding numbers of thousands
of digits is refused, and a shape's element count is compared with the file's data size as it is
multiplied, so no claimed number ever sizes an allocation or a loop (tests/hardening fuzzes this).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from app.engine.bounded_json import parse_bounded_json
from app.engine.errors import ExtractError
from app.engine.mtp.source import CheckpointSource

# Bits per element of every dtype a safetensors header may name.
DTYPE_BITS: Mapping[str, int] = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "C64": 64,
    "F64": 64,
    "I64": 64,
    "U64": 64,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
}
HEADER_LIMIT = 100_000_000  # the limit the safetensors library itself enforces


@dataclass(frozen=True)
class StoredTensor:
    """One tensor as stored in a checkpoint file: where its bytes are and how to read them."""

    name: str
    shard: str
    dtype: str
    shape: tuple[int, ...]
    start: int
    """Absolute byte offset of the first data byte in ``shard``."""
    end: int
    """Absolute byte offset just past the last data byte."""

    @property
    def nbytes(self) -> int:
        return self.end - self.start

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class ShardHeader:
    """A validated header: the tensors of one file, keyed by name."""

    shard: str
    header_bytes: int
    """8 + the JSON length: where the data area starts."""
    tensors: Mapping[str, StoredTensor]


def expected_nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    return (math.prod(shape) * DTYPE_BITS[dtype] + 7) // 8


def read_shard_header(source: CheckpointSource, shard: str) -> ShardHeader:
    """Read ``shard``'s header with two range reads and check every entry against the file."""
    where = f"{source.label}/{shard}"
    file_size = source.file_sizes()[shard]
    if file_size < 8:
        raise ExtractError(
            f"{where} is truncated ({file_size} bytes, too short for a safetensors header); "
            "re-download this shard"
        )
    header_length = int.from_bytes(source.read_bytes(shard, 0, 8), "little")
    if header_length > HEADER_LIMIT:
        raise ExtractError(
            f"{where} declares a {header_length}-byte header (limit {HEADER_LIMIT}); "
            "this is not a valid safetensors file — re-download this shard"
        )
    if 8 + header_length > file_size:
        raise ExtractError(
            f"{where}: header length {header_length} reaches beyond the end of the file "
            f"({file_size} bytes); the shard is truncated or not a safetensors file — "
            "re-download it"
        )
    raw = source.read_bytes(shard, 8, header_length)
    try:
        entries = parse_bounded_json(raw, max_bytes=HEADER_LIMIT)
    except ValueError as exc:
        raise ExtractError(
            f"{where}: the safetensors header {exc}; re-download this shard"
        ) from None
    if not isinstance(entries, dict):
        raise ExtractError(f"{where}: the safetensors header is not a JSON object")
    data_start = 8 + header_length
    data_size = file_size - data_start
    tensors = {
        name: _parse_entry(where, shard, name, entry, data_start, data_size)
        for name, entry in entries.items()
        if name != "__metadata__"
    }
    _check_no_overlap(where, tensors.values())
    return ShardHeader(shard=shard, header_bytes=data_start, tensors=tensors)


def _parse_entry(
    where: str, shard: str, name: str, entry: object, data_start: int, data_size: int
) -> StoredTensor:
    if not isinstance(entry, dict):
        raise ExtractError(f"{where}: header entry for tensor {name} is not an object")
    dtype = entry.get("dtype")
    if dtype not in DTYPE_BITS:
        raise ExtractError(
            f"{where}: tensor {name} has unknown dtype {dtype!r} "
            f"(known: {', '.join(DTYPE_BITS)}); the shard is corrupt or from a newer format"
        )
    shape = entry.get("shape")
    if not isinstance(shape, list) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape
    ):
        raise ExtractError(f"{where}: tensor {name} has an invalid shape {shape!r}")
    offsets = entry.get("data_offsets")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(isinstance(n, int) and not isinstance(n, bool) for n in offsets)
        or not 0 <= offsets[0] <= offsets[1]
    ):
        raise ExtractError(f"{where}: tensor {name} has invalid data_offsets {offsets!r}")
    begin, end = offsets
    if _element_count_exceeds(shape, 8 * data_size // DTYPE_BITS[dtype]):
        raise ExtractError(
            f"{where}: tensor {name} ({dtype} {shape}) has more elements than the file's "
            f"{data_size} data bytes can hold; the header is corrupt — re-download this shard"
        )
    size = expected_nbytes(dtype, tuple(shape))
    if end - begin != size:
        raise ExtractError(
            f"{where}: tensor {name} ({dtype} {shape}) needs {size} bytes but its data_offsets "
            f"{offsets} span {end - begin}; the header is corrupt — re-download this shard"
        )
    if end > data_size:
        raise ExtractError(
            f"{where}: tensor {name} ends at data offset {end} but the file holds only "
            f"{data_size} data bytes; the shard is truncated or its offsets are out of range — "
            "re-download it"
        )
    return StoredTensor(name, shard, dtype, tuple(shape), data_start + begin, data_start + end)


def _element_count_exceeds(shape: list[int], limit: int) -> bool:
    """Whether the product of ``shape`` passes ``limit``, stopping as soon as it does."""
    if 0 in shape:
        return False
    count = 1
    for dim in shape:
        count *= dim
        if count > limit:
            return True
    return False


def _check_no_overlap(where: str, tensors: Iterable[StoredTensor]) -> None:
    ordered = sorted((t for t in tensors if t.nbytes), key=lambda t: (t.start, t.end))
    for before, after in itertools.pairwise(ordered):
        if after.start < before.end:
            raise ExtractError(
                f"{where}: tensors {before.name} and {after.name} overlap in the file "
                f"(bytes {before.start}-{before.end} and {after.start}-{after.end}); "
                "the header is corrupt — re-download this shard"
            )
