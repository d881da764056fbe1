"""Reads an MTP sidecar (``mtp.safetensors``) by byte ranges: its tensor table, then rows as F32.

A sidecar's head of a large MoE model holds gigabytes of expert weights, so nothing here loads a
whole tensor: the graft asks for a range of rows, converts it to float32 (the precision
llama.cpp's converter quantises from) and writes it out before reading the next range.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from app.engine.errors import ExtractError, GraftError
from app.engine.mtp.header import read_shard_header
from app.engine.mtp.source import LocalFolderSource

ELEMENT_BYTES = {"BF16": 2, "F16": 2, "F32": 4}


@dataclass(frozen=True)
class SidecarTensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    """In safetensors (row-major) order, the reverse of GGML's."""
    start: int
    """Absolute offset of the first data byte in the file."""

    @property
    def rows(self) -> int:
        """Rows when the tensor is seen as (everything but the last axis) × last axis."""
        count = 1
        for dim in self.shape[:-1]:
            count *= dim
        return count

    @property
    def row_length(self) -> int:
        return self.shape[-1] if self.shape else 1


@dataclass(frozen=True)
class Sidecar:
    path: Path
    tensors: dict[str, SidecarTensor]


def read_sidecar(path: Path) -> Sidecar:
    """The tensor table of ``path``, read by the extractor's checked safetensors header reader
    (sizes, offsets and overlaps against the file), limited to the dtypes a sidecar holds."""
    path = Path(path)
    if not path.is_file():
        raise GraftError(f"cannot read the sidecar {path} (no such file); check the path")
    try:
        header = read_shard_header(LocalFolderSource(path.parent), path.name)
    except ExtractError as exc:
        raise GraftError(
            f"{path} is not a usable safetensors sidecar ({exc}); make it again with "
            "mtp-studio extract"
        ) from None
    tensors: dict[str, SidecarTensor] = {}
    for name, stored in header.tensors.items():
        if stored.dtype not in ELEMENT_BYTES:
            raise GraftError(
                f"sidecar {path.name}: tensor {name} is {stored.dtype}; a sidecar holds BF16 (or "
                "F16/F32) tensors — make it again with mtp-studio extract"
            )
        tensors[name] = SidecarTensor(name, stored.dtype, stored.shape, stored.start)
    if not tensors:
        raise GraftError(f"sidecar {path} holds no tensors; make it again with mtp-studio extract")
    return Sidecar(path, tensors)


def read_rows(handle: BinaryIO, tensor: SidecarTensor, first: int, count: int) -> np.ndarray:
    """Rows ``first .. first + count`` of ``tensor`` as a float32 array of shape (count, row)."""
    width = ELEMENT_BYTES[tensor.dtype]
    row_bytes = tensor.row_length * width
    handle.seek(tensor.start + first * row_bytes)
    raw = _read_exactly(handle, count * row_bytes)
    if tensor.dtype == "BF16":
        values = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    elif tensor.dtype == "F16":
        values = np.frombuffer(raw, dtype="<f2").astype(np.float32)
    else:
        values = np.frombuffer(raw, dtype="<f4").copy()
    return values.reshape(count, tensor.row_length)


def read_all(handle: BinaryIO, tensor: SidecarTensor) -> np.ndarray:
    """The whole tensor as float32 in its own shape (for small tensors: norms, biases)."""
    return read_rows(handle, tensor, 0, tensor.rows).reshape(tensor.shape)


def _read_exactly(handle: BinaryIO, count: int) -> bytes:
    data = handle.read(count)
    if len(data) != count:
        raise EOFError(f"the file ends {count - len(data)} bytes early")
    return data
