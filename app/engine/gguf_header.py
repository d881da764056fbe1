"""Reads a GGUF file's header quickly: its metadata keys and how long the file must be.

The runtime checks a file before llama.cpp loads it, and the model picker describes every model
it lists (architecture, MTP blocks, cache shape). The ``gguf`` package's reader parses the whole
file, including a 150 000-entry vocabulary, into numpy views — about ten seconds for one real model
on a busy 2-core machine. Both need only scalar keys and short arrays, so this reader walks the
key/value section once and seeks past long arrays (strings by their length prefixes), which takes
milliseconds.

It also reads the tensor table, so a truncated download (header intact, data cut short) is
caught from the header — the size the tensors need against the size on disk — before llama.cpp
is ever asked to load it.

Every count and length in the header is checked against the bytes left in the file before it is
used (to read, seek or loop), arrays may nest only :data:`MAX_ARRAY_DEPTH` deep, and a tensor
shape whose element count passes 2^64 is refused: a hostile or corrupt file gets a clear error,
never a hang, a crash or an allocation sized by a number it claims. :class:`GgufFieldReader` holds
those checks and is the one GGUF field reader: the graft's byte-span reader
(:mod:`app.engine.graft.gguf_layout`) builds on it too.
"""

from __future__ import annotations

import io
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from gguf import GGML_QUANT_SIZES, GGUF_DEFAULT_ALIGNMENT, GGMLQuantizationType

from app.engine.errors import RuntimeBackendError

GGUF_MAGIC = b"GGUF"
SHORT_ARRAY_LIMIT = 64
"""Arrays with at most this many items are read (e.g. per-layer head counts); longer are skipped."""

_SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
STRING_TYPE = 8
ARRAY_TYPE = 9
MAX_STRING_BYTES = 64 * 1024 * 1024
MAX_ARRAY_DEPTH = 8
_MAX_ELEMENTS = 2**64
KEY_MIN_BYTES = 12
"""The least a metadata entry takes: its key's length prefix and its value type."""
TENSOR_MIN_BYTES = 24
"""The least a tensor-table entry takes: name length, dimension count, type and offset."""


@dataclass(frozen=True)
class LongArray:
    """Stands for an array that was skipped: only its length is known."""

    count: int


@dataclass(frozen=True)
class GgufHeader:
    """``metadata``: every key (a :class:`LongArray` for a long array); ``required_bytes``: the
    file size the tensor table needs (None when a tensor type is unknown to this reader)."""

    metadata: dict[str, Any]
    required_bytes: int | None


class GgufFieldReader:
    """Reads GGUF fields from ``handle``; every length is checked against the bytes left first.

    Raises ``ValueError`` (a claim the file cannot hold, a nesting too deep, an unknown type)
    or ``EOFError``; callers turn both into their area's error.
    """

    def __init__(self, handle: BinaryIO, order: str, file_size: int) -> None:
        self._handle = handle
        self._order = order
        self._file_size = file_size

    def claim(self, count: int, item_bytes: int, what: str) -> None:
        """Raise ValueError unless ``count`` items of ``item_bytes`` fit in the bytes left."""
        left = self._file_size - self._handle.tell()
        if count * item_bytes > left:
            raise ValueError(f"{what} claims {count} × {item_bytes} bytes, {left} are left")

    def unpack(self, code: str) -> Any:
        size = struct.calcsize(code)
        data = self._handle.read(size)
        if len(data) != size:
            raise EOFError
        return struct.unpack(self._order + code, data)[0]

    def string(self) -> str:
        length = self.unpack("Q")
        if length > MAX_STRING_BYTES:
            raise ValueError(f"a metadata string of {length} bytes")
        self.claim(length, 1, "a string")
        data = self._handle.read(length)
        if len(data) != length:
            raise EOFError
        return data.decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        length = self.unpack("Q")
        self.claim(length, 1, "a string")
        self._handle.seek(length, 1)

    def value(self, kind: int, depth: int = 0) -> Any:
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind])
        if kind == STRING_TYPE:
            return self.string()
        if kind == ARRAY_TYPE:
            item_kind, count = self.array_header(depth)
            if count <= SHORT_ARRAY_LIMIT:
                return [self.value(item_kind, depth + 1) for _ in range(count)]
            self.skip_array(item_kind, count, depth + 1)
            return LongArray(count)
        raise ValueError(f"unknown metadata value type {kind}")

    def array_header(self, depth: int) -> tuple[int, int]:
        """An array's item type and count, checked against the nesting limit and the file."""
        if depth >= MAX_ARRAY_DEPTH:
            raise ValueError(f"metadata arrays nested more than {MAX_ARRAY_DEPTH} deep")
        item_kind = self.unpack("I")
        count = self.unpack("Q")
        item_bytes = struct.calcsize(_SCALARS[item_kind]) if item_kind in _SCALARS else 8
        self.claim(count, item_bytes, "an array")
        return item_kind, count

    def skip_array(self, item_kind: int, count: int, depth: int) -> None:
        if item_kind in _SCALARS:
            self._handle.seek(struct.calcsize(_SCALARS[item_kind]) * count, 1)
        elif item_kind == STRING_TYPE:
            for _ in range(count):
                self.skip_string()
        else:
            for _ in range(count):
                self.value(item_kind, depth)


def read_gguf_header(path: Path) -> GgufHeader:
    """The metadata of ``path`` and the file size its tensors need."""
    try:
        with open(path, "rb", buffering=1024 * 1024) as handle:
            if handle.read(4) != GGUF_MAGIC:
                raise ValueError("it does not start with the GGUF magic bytes")
            version_bytes = handle.read(4)
            order = "<" if struct.unpack("<I", version_bytes)[0] < 0x10000 else ">"
            reader = GgufFieldReader(handle, order, os.fstat(handle.fileno()).st_size)
            version = struct.unpack(order + "I", version_bytes)[0]
            if version < 2:
                raise ValueError(f"GGUF version {version} is too old (llama.cpp reads 2 and 3)")
            tensor_count = reader.unpack("Q")
            key_count = reader.unpack("Q")
            reader.claim(key_count, KEY_MIN_BYTES, "the key count")
            metadata: dict[str, Any] = {}
            for _ in range(key_count):
                key = reader.string()
                metadata[key] = reader.value(reader.unpack("I"))
            reader.claim(tensor_count, TENSOR_MIN_BYTES, "the tensor count")
            data_end = 0
            known = True
            for _ in range(tensor_count):
                reader.skip_string()
                dim_count = reader.unpack("I")
                reader.claim(dim_count, 8, "a tensor's dimension count")
                dims = [reader.unpack("Q") for _ in range(dim_count)]
                kind, offset = reader.unpack("I"), reader.unpack("Q")
                nbytes = tensor_bytes(kind, dims)
                known = known and nbytes is not None
                data_end = max(data_end, offset + (nbytes or 0))
            alignment = metadata.get("general.alignment", GGUF_DEFAULT_ALIGNMENT)
            if not isinstance(alignment, int) or alignment <= 0:
                alignment = GGUF_DEFAULT_ALIGNMENT
            header_end = handle.tell()
            data_start = -(-header_end // alignment) * alignment
            required = data_start + data_end if data_end else header_end
            return GgufHeader(metadata, required if known else None)
    except OSError as exc:
        raise RuntimeBackendError(
            f"cannot read {path} ({exc.strerror or exc}); check that the file exists and is "
            "readable"
        ) from None
    except (EOFError, ValueError, struct.error, OverflowError) as exc:
        reason = "it ends inside its header" if isinstance(exc, EOFError) else str(exc)
        raise RuntimeBackendError(
            f"{path} is not a readable GGUF file ({reason}); re-download it or convert the "
            "model again with llama.cpp's converter"
        ) from None


def metadata_prefix(data: bytes) -> dict[str, Any]:
    """The metadata entries that lie wholly inside ``data``, the first bytes of a GGUF file.

    For a file not downloaded yet: a ranged read of its first kilobytes holds the model's scalar
    keys (llama.cpp's converter writes them before the tokenizer's long arrays). Reading stops at
    the first entry that runs past ``data``; anything that is not a GGUF gives an empty mapping.
    """
    if len(data) < 24 or data[:4] != GGUF_MAGIC:
        return {}
    handle = io.BytesIO(data)
    handle.seek(4)
    version_bytes = handle.read(4)
    order = "<" if struct.unpack("<I", version_bytes)[0] < 0x10000 else ">"
    reader = GgufFieldReader(handle, order, len(data))
    metadata: dict[str, Any] = {}
    try:
        reader.unpack("Q")  # the tensor count
        for _ in range(reader.unpack("Q")):
            key = reader.string()
            metadata[key] = reader.value(reader.unpack("I"))
    except (EOFError, ValueError, struct.error, OverflowError):
        pass  # the entry runs past the bytes read: what came before it is complete
    return metadata


def tensor_bytes(kind: int, dims: list[int] | tuple[int, ...]) -> int | None:
    """Bytes a tensor takes (None: a type unknown here); ValueError past 2^64 elements."""
    try:
        block, size = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
    except (ValueError, KeyError):
        return None
    elements = 1
    for dim in dims:
        elements *= dim
        if elements > _MAX_ELEMENTS:
            raise ValueError(f"a tensor shape {dims[:8]} has more than 2^64 elements")
    return elements // block * size
