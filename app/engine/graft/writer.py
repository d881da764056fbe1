"""Writes the grafted GGUF: a new header, the base's tensor bytes copied, the head appended.

Memory stays bounded whatever the base's size: the base's tensor data is copied by the kernel
(``copy_file_range``, falling back to 8 MiB reads and writes) in 256 MiB steps, and the head is
quantised and written a few megabytes of rows at a time. Base tensors keep their order and, when
nothing is dropped, their offsets, so their bytes move as one run. Each step reports progress
(bytes) and checks the cancel token. The file is written under a temporary name beside the output
and renamed over it when complete; any failure or cancellation removes the temporary file, so the
output path only ever holds a complete file. The temporary file is created exclusively with a
random name (:mod:`app.engine.partial_files`), and those left by a killed graft are removed, and
logged, when the next graft writes to the same folder. Like the extractor and the downloads, it
leaves writeback to the OS (no fsync): on a page-cached base an fsync costs about half a plain
copy again (bench_graft prints both), and it guards only against power loss, not a failed job.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
from gguf import GGUFValueType

from app.engine.errors import GraftError
from app.engine.graft.gguf_layout import GGUF_MAGIC, GgufLayout, TensorInfo
from app.engine.graft.metadata import MetadataPlan, NewEntry, encode_entry
from app.engine.graft.naming import HeadTensor, RowSlice
from app.engine.graft.plan import GraftPlan, PlannedTensor
from app.engine.graft.quantise import encode_rows
from app.engine.graft.sidecar import SidecarTensor, read_rows, read_sidecar
from app.engine.jobs import JobContext, ProgressReporter
from app.engine.partial_files import create_partial, sweep_partials

COPY_STEP = 256 * 1024 * 1024
PAGE = 4096
COPY_GRAIN = 64 * 1024
"""The kernel copies page-cached data about 1.4× faster when the source offset is page-aligned
and the target offset a multiple of 64 KiB (measured on ext4: 0.21 s against 0.29–0.33 s for
768 MiB). The header is padded so the base's data keeps its offset modulo a page, and each run's
first ``(-target) mod COPY_GRAIN`` bytes are copied apart, so the rest meets both."""
PADDING_KEY = "mtp_studio.graft.alignment_padding"
"""A string entry of spaces sized so the data section starts at the base's offset modulo a page."""
FALLBACK_BUFFER = 8 * 1024 * 1024
HEAD_CHUNK_FLOATS = 4 * 1024 * 1024
"""Rows of the head are converted about 16 MiB of float32 at a time."""
GGUF_VERSION = 3


@dataclass(frozen=True)
class Placement:
    """Where one output tensor goes: its table entry and data offset (relative)."""

    name: str
    dims: tuple[int, ...]
    ggml_type: int
    offset: int


@dataclass(frozen=True)
class CopyRun:
    """Bytes of the base's data section copied in one piece."""

    source: int
    target: int
    length: int


GRAFT_PARTIAL = "graft-partial"


BodyWriter = Callable[[int, int, ProgressReporter], None]
"""Writes the data section: given the open file, its data start and the progress reporter."""


def write_graft(plan: GraftPlan, out: Path, ctx: JobContext) -> int:
    """Write the graft described by ``plan`` to ``out``; return the bytes written."""
    alignment = plan.layout.alignment
    kept_places, runs, base_end = place_tensors(plan.kept, alignment)
    head_places = []
    offset = base_end
    for tensor in plan.head:
        offset = _align(offset, alignment)
        head = tensor.head
        head_places.append(Placement(head.name, head.dims, int(tensor.ggml_type), offset))
        offset += tensor.nbytes

    def body(fd: int, data_start: int, progress: ProgressReporter) -> None:
        copy_runs(plan.layout, fd, data_start, runs, progress)
        _write_head(plan, fd, data_start, head_places, progress)

    places = kept_places + head_places
    return write_gguf(plan.layout, plan.metadata, places, offset, out, ctx, body)


def write_gguf(
    layout: GgufLayout,
    metadata: MetadataPlan,
    places: list[Placement],
    data_bytes: int,
    out: Path,
    ctx: JobContext,
    body: BodyWriter,
) -> int:
    """Write ``layout``'s metadata as changed by ``metadata``, the tensor table ``places`` and
    the data section (``body``, ``data_bytes`` long) to ``out`` under a temporary name, renamed
    over ``out`` only when complete; return the bytes written."""
    header = _header(layout, metadata, places, layout.alignment)
    data_start = _align(len(header), layout.alignment)
    total = data_start + data_bytes
    for leftover in sweep_partials(out.parent, GRAFT_PARTIAL):
        ctx.log(leftover.describe())
    progress = ctx.progress_reporter("write", total)
    temporary: Path | None = None
    try:
        fd, temporary = create_partial(out, GRAFT_PARTIAL)
        try:
            _write_all(fd, header + bytes(data_start - len(header)))
            progress.update(data_start)
            body(fd, data_start, progress)
            if os.lseek(fd, 0, os.SEEK_CUR) != total:
                raise AssertionError("graft output size differs from its plan")
        finally:
            os.close(fd)
        os.replace(temporary, out)
    except OSError as exc:
        if temporary is not None:
            temporary.unlink(missing_ok=True)
        raise GraftError(
            f"writing {out} failed ({exc.strerror or exc}); check the free space and permissions "
            f"of {out.parent}, then run the graft again"
        ) from None
    except BaseException:
        if temporary is not None:
            temporary.unlink(missing_ok=True)
        raise
    return total


def _align(offset: int, alignment: int) -> int:
    return -(-offset // alignment) * alignment


def place_tensors(
    kept: tuple[TensorInfo, ...], alignment: int, start: int = 0
) -> tuple[list[Placement], list[CopyRun], int]:
    """New offsets (from ``start``) for tensors copied from one file, the runs to copy, and the
    end. They are packed in table order, as llama.cpp's loader requires (each offset must equal
    the aligned end of the previous tensor), so a valid file's data keeps its layout and moves as
    one run."""
    targets: dict[str, int] = {}
    runs: list[CopyRun] = []
    position = start
    for tensor in kept:
        position = _align(position, alignment)
        targets[tensor.name] = position
        last = runs[-1] if runs else None
        if last and tensor.offset - last.source == position - last.target:
            runs[-1] = CopyRun(last.source, last.target, position - last.target + tensor.nbytes)
        else:
            runs.append(CopyRun(tensor.offset, position, tensor.nbytes))
        position += tensor.nbytes
    places = [Placement(t.name, t.dims, t.ggml_type, targets[t.name]) for t in kept]
    return places, runs, position


def _header(
    layout: GgufLayout, metadata: MetadataPlan, places: list[Placement], alignment: int
) -> bytes:
    """The output's header. Its last metadata entry is the padding string, sized so the data
    section starts at the base's offset modulo a page (the copied runs keep their alignment)."""
    changed = metadata.replaced
    appended = metadata.appended
    kv_count = len(layout.entries) + len(appended) + 1
    parts = [GGUF_MAGIC, struct.pack("<IQQ", GGUF_VERSION, len(places), kv_count)]
    with open(layout.path, "rb") as handle:
        for entry in layout.entries:
            if entry.key in changed:
                parts.append(encode_entry(changed[entry.key]))
            else:
                handle.seek(entry.start)
                parts.append(handle.read(entry.end - entry.start))
    parts.extend(encode_entry(entry) for entry in appended)
    tensor_infos = []
    for place in places:
        name = place.name.encode("utf-8")
        tensor_infos.append(
            struct.pack("<Q", len(name)) + name + struct.pack("<I", len(place.dims))
        )
        tensor_infos.append(struct.pack(f"<{len(place.dims)}Q", *place.dims))
        tensor_infos.append(struct.pack("<IQ", place.ggml_type, place.offset))
    unpadded = sum(map(len, parts)) + sum(map(len, tensor_infos))
    unpadded += len(encode_entry(NewEntry(PADDING_KEY, GGUFValueType.STRING, "")))
    wanted = _align(unpadded, alignment)
    wanted += (layout.data_start - wanted) % PAGE
    padding = NewEntry(PADDING_KEY, GGUFValueType.STRING, " " * (wanted - unpadded))
    return b"".join([*parts, encode_entry(padding), *tensor_infos])


def copy_runs(
    layout: GgufLayout, fd: int, data_start: int, runs: list[CopyRun], progress: ProgressReporter
) -> None:
    """Copy ``runs`` of ``layout``'s data section into the output at ``data_start``."""
    with open(layout.path, "rb", buffering=0) as source:
        for run in runs:
            _pad_to(fd, data_start + run.target)
            done = 0
            while done < run.length:
                to_grain = -(data_start + run.target + done) % COPY_GRAIN
                step = min(to_grain or COPY_STEP, run.length - done)
                _copy_range(source.fileno(), fd, layout.data_start + run.source + done, step)
                done += step
                progress.advance(step)


def _copy_range(source: int, target: int, offset: int, count: int) -> None:
    while count:
        try:
            copied = os.copy_file_range(source, target, count, offset)
        except (OSError, AttributeError):
            copied = 0
        if copied <= 0:
            copied = _copy_buffered(source, target, offset, min(count, FALLBACK_BUFFER))
        offset += copied
        count -= copied


def _copy_buffered(source: int, target: int, offset: int, count: int) -> int:
    data = os.pread(source, count, offset)
    if not data:
        raise OSError(f"a source GGUF ended early at byte {offset}; it changed during the graft")
    _write_all(target, data)
    return len(data)


def _write_head(
    plan: GraftPlan,
    fd: int,
    data_start: int,
    places: list[Placement],
    progress: ProgressReporter,
) -> None:
    sidecar = read_sidecar(plan.sidecar)
    with open(plan.sidecar, "rb") as handle:
        for tensor, place in zip(plan.head, places, strict=True):
            _pad_to(fd, data_start + place.offset)
            for rows in _head_rows(handle, sidecar.tensors, tensor.head):
                data = encode_rows(rows, tensor.ggml_type)
                _write_all(fd, data)
                progress.advance(len(data))
            _check_written(fd, data_start + place.offset, tensor)


def _head_rows(
    handle: BinaryIO, tensors: dict[str, SidecarTensor], head: HeadTensor
) -> Iterator[np.ndarray]:
    """The head tensor's rows, in order and transformed, a bounded chunk at a time."""
    for piece in head.slices:
        yield from _slice_rows(handle, tensors[piece.source], piece, head)


def _slice_rows(
    handle: BinaryIO, source: SidecarTensor, piece: RowSlice, head: HeadTensor
) -> Iterator[np.ndarray]:
    if piece.transpose:
        block = read_rows(handle, source, piece.first, piece.count)
        yield np.ascontiguousarray(block.T)  # one head of MLA's k_b: small
        return
    step = max(1, HEAD_CHUNK_FLOATS // max(1, source.row_length))
    for first in range(piece.first, piece.first + piece.count, step):
        count = min(step, piece.first + piece.count - first)
        rows = read_rows(handle, source, first, count)
        if head.add_one:
            rows = rows + np.float32(1.0)
        yield rows.reshape(-1, head.shape[-1])


def _check_written(fd: int, start: int, tensor: PlannedTensor) -> None:
    written = os.lseek(fd, 0, os.SEEK_CUR) - start
    if written != tensor.nbytes:
        raise AssertionError(f"{tensor.head.name}: wrote {written} bytes, planned {tensor.nbytes}")


def _pad_to(fd: int, position: int) -> None:
    current = os.lseek(fd, 0, os.SEEK_CUR)
    if position < current:
        raise AssertionError(f"graft layout overlaps at byte {position} (written {current})")
    if position > current:
        _write_all(fd, bytes(position - current))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
