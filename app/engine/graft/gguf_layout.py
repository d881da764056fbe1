"""Where everything in a GGUF file is, byte for byte, without reading its tensor data.

Grafting copies the base model's metadata entries and tensors unchanged, so it needs each
metadata entry as a raw byte span (to copy it verbatim), the few values it changes decoded, and
every tensor's type, dimensions and data offset. :mod:`app.engine.gguf_header` answers a
different question (values for display, long arrays skipped), so this reader keeps spans instead.
It walks the header once with seeks past long arrays, so a 150 000-entry vocabulary costs
milliseconds, and it checks the file is as long as its tensor table says (a truncated download is
refused here, before anything is written). Fields are read by the hardened
:class:`~app.engine.gguf_header.GgufFieldReader`, so every count, string length and nesting depth
the file declares is checked against the bytes it holds before it is used.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from gguf import GGUF_DEFAULT_ALIGNMENT, GGUFValueType

from app.engine.errors import GraftError
from app.engine.gguf_header import (
    ARRAY_TYPE,
    KEY_MIN_BYTES,
    STRING_TYPE,
    TENSOR_MIN_BYTES,
    GgufFieldReader,
    tensor_bytes,
)

GGUF_MAGIC = b"GGUF"
DECODED_ARRAY_LIMIT = 1024
"""Arrays up to this many items are decoded (per-layer arrays: one item per block); longer ones
(a vocabulary, its merges) are only spanned, never decoded item by item."""

SCALAR_FORMATS: dict[int, str] = {
    GGUFValueType.UINT8: "B",
    GGUFValueType.INT8: "b",
    GGUFValueType.UINT16: "H",
    GGUFValueType.INT16: "h",
    GGUFValueType.UINT32: "I",
    GGUFValueType.INT32: "i",
    GGUFValueType.FLOAT32: "f",
    GGUFValueType.BOOL: "?",
    GGUFValueType.UINT64: "Q",
    GGUFValueType.INT64: "q",
    GGUFValueType.FLOAT64: "d",
}


@dataclass(frozen=True)
class MetadataEntry:
    """One key/value pair: its decoded value (None for a long array) and its raw bytes' span."""

    key: str
    value_type: int
    item_type: int | None
    """For arrays: the type of the items."""
    value: Any
    start: int
    """Offset of the entry (its key's length prefix) in the file."""
    end: int


@dataclass(frozen=True)
class TensorInfo:
    """A tensor as the table describes it; ``dims`` in GGML order (fastest-varying first)."""

    name: str
    dims: tuple[int, ...]
    ggml_type: int
    offset: int
    """Relative to the start of the data section."""
    nbytes: int


@dataclass(frozen=True)
class GgufLayout:
    path: Path
    version: int
    alignment: int
    entries: tuple[MetadataEntry, ...]
    tensors: tuple[TensorInfo, ...]
    data_start: int
    file_size: int

    def value(self, key: str, default: Any = None) -> Any:
        for entry in self.entries:
            if entry.key == key:
                return entry.value
        return default

    def entry(self, key: str) -> MetadataEntry | None:
        return next((entry for entry in self.entries if entry.key == key), None)

    def tensor(self, name: str) -> TensorInfo | None:
        return next((tensor for tensor in self.tensors if tensor.name == name), None)

    @property
    def architecture(self) -> str:
        return str(self.value("general.architecture", ""))


class _SpanReader(GgufFieldReader):
    """The hardened field reader, returning each value with its array item type."""

    def entry_value(self, value_type: int, depth: int = 0) -> tuple[Any, int | None]:
        if value_type in SCALAR_FORMATS:
            return self.unpack(SCALAR_FORMATS[value_type]), None
        if value_type == STRING_TYPE:
            return self.string(), None
        if value_type == ARRAY_TYPE:
            item_type, count = self.array_header(depth)
            if count <= DECODED_ARRAY_LIMIT:
                items = [self.entry_value(item_type, depth + 1)[0] for _ in range(count)]
                return items, item_type
            self.skip_array(item_type, count, depth + 1)
            return None, item_type
        raise ValueError(f"unknown metadata value type {value_type}")


def read_gguf_layout(path: Path) -> GgufLayout:
    """The layout of ``path``; a :class:`GraftError` if it is not a complete GGUF file."""
    path = Path(path)
    try:
        with open(path, "rb", buffering=1024 * 1024) as handle:
            file_size = os.fstat(handle.fileno()).st_size
            layout = _read(handle, path, file_size)
    except OSError as exc:
        raise GraftError(
            f"cannot read the base GGUF {path} ({exc.strerror or exc}); check the path"
        ) from None
    except (EOFError, ValueError, struct.error, OverflowError) as exc:
        reason = "it ends inside its header" if isinstance(exc, EOFError) else str(exc)
        raise GraftError(
            f"{path} is not a readable GGUF file ({reason}); download it again"
        ) from None
    needed = max((t.offset + t.nbytes for t in layout.tensors), default=0) + layout.data_start
    if needed > file_size:
        raise GraftError(
            f"{path} is truncated: its tensor table needs {needed} bytes but the file has "
            f"{file_size}; download it again (a resumable download continues where it stopped)"
        )
    return layout


def _read(handle: BinaryIO, path: Path, file_size: int) -> GgufLayout:
    if handle.read(4) != GGUF_MAGIC:
        raise ValueError("it does not start with the GGUF magic bytes")
    reader = _SpanReader(handle, "<", file_size)
    version = reader.unpack("I")
    if version >= 0x10000:
        raise ValueError("it is a big-endian GGUF, which grafting does not support")
    if version < 2:
        raise ValueError(f"GGUF version {version} is too old (llama.cpp reads 2 and 3)")
    tensor_count = reader.unpack("Q")
    key_count = reader.unpack("Q")
    reader.claim(key_count, KEY_MIN_BYTES, "the key count")
    entries: list[MetadataEntry] = []
    for _ in range(key_count):
        start = handle.tell()
        key = reader.string()
        value_type = reader.unpack("I")
        value, item_type = reader.entry_value(value_type)
        entries.append(MetadataEntry(key, value_type, item_type, value, start, handle.tell()))
    reader.claim(tensor_count, TENSOR_MIN_BYTES, "the tensor count")
    tensors: list[TensorInfo] = []
    for _ in range(tensor_count):
        name = reader.string()
        dim_count = reader.unpack("I")
        reader.claim(dim_count, 8, f"tensor {name!r}'s dimension count")
        dims = tuple(reader.unpack("Q") for _ in range(dim_count))
        ggml_type, offset = reader.unpack("I"), reader.unpack("Q")
        nbytes = tensor_bytes(ggml_type, dims)
        if nbytes is None:
            raise ValueError(f"tensor {name!r} has a type ({ggml_type}) unknown here")
        tensors.append(TensorInfo(name, dims, ggml_type, offset, nbytes))
    alignment = next((e.value for e in entries if e.key == "general.alignment"), None)
    if not isinstance(alignment, int) or alignment <= 0:
        alignment = GGUF_DEFAULT_ALIGNMENT
    data_start = -(-handle.tell() // alignment) * alignment
    return GgufLayout(
        path, version, alignment, tuple(entries), tuple(tensors), data_start, file_size
    )
