"""Joining a split GGUF (``…-00001-of-00003.gguf``) into one file, so its head can be grafted.

Large GGUFs are published split (llama.cpp's ``gguf-split``): the first part holds every metadata
entry plus ``split.no`` / ``split.count`` / ``split.tensors.count``, and each part holds its own
tensor table and data. llama.cpp loads the first part and finds the others by their names.

Why join rather than put the head into the last part: grafting changes metadata
(``block_count``, ``nextn_predict_layers``, per-layer arrays) that lives in the first part, and
tensors that would go into the last part, and llama.cpp finds the parts by the first part's name —
so a grafted split copy needs a rewritten first part, a rewritten last part and every part renamed
to a new prefix anyway. One joined file is what every reader here takes (llama.cpp, the Models
page, the graft), it shows once in the Models page, and the graft then runs unchanged on it.
The cost is one extra copy of the model on the way (the joined file is removed after the graft).

The joined file has the first part's entries without the ``split.*`` ones and every part's
tensors in part order, packed as llama.cpp's loader requires; it is written under a temporary
name and renamed when complete.
"""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path
from typing import BinaryIO

from app.engine.errors import GraftError
from app.engine.graft.gguf_layout import GGUF_MAGIC, GgufLayout, TensorInfo, read_gguf_layout
from app.engine.jobs import JobContext
from app.engine.partial_files import create_partial, sweep_partials
from app.engine.units import format_names

JOIN_PARTIAL = "join-partial"
"""The suffix of a join's temporary file (created exclusively; a killed join's is swept)."""

SPLIT_NAME = re.compile(r"^(?P<prefix>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")
COPY_BUFFER = 8 * 1024 * 1024


def is_split_part(path: Path) -> bool:
    return SPLIT_NAME.match(Path(path).name) is not None


def joined_name(first_part: Path) -> str:
    """``Model-BF16-00001-of-00003.gguf`` → ``Model-BF16.gguf``."""
    match = SPLIT_NAME.match(Path(first_part).name)
    return f"{match.group('prefix')}.gguf" if match else Path(first_part).name


def split_parts(first_part: Path) -> list[Path]:
    """Every part of the split GGUF whose first part is ``first_part``, in order."""
    first_part = Path(first_part)
    match = SPLIT_NAME.match(first_part.name)
    if match is None or int(match.group("no")) != 1:
        raise GraftError(
            f"{first_part.name} is not the first part of a split GGUF "
            "(expected a name ending in -00001-of-0000N.gguf)"
        )
    count = int(match.group("count"))
    parts = [
        first_part.with_name(f"{match.group('prefix')}-{no:05d}-of-{count:05d}.gguf")
        for no in range(1, count + 1)
    ]
    missing = [part.name for part in parts if not part.is_file()]
    if missing:
        raise GraftError(
            f"{len(missing):,} of the {count:,} parts of {first_part.name} are missing beside it "
            f"({format_names(missing)}); download every part of the quantisation "
            "(mtp-studio download REPO --quant LABEL)"
        )
    return parts


def join_split_gguf(first_part: Path, out: Path, ctx: JobContext | None = None) -> Path:
    """Write the parts of ``first_part`` as one GGUF at ``out``; returns ``out``."""
    ctx = ctx or JobContext()
    layouts = [read_gguf_layout(part) for part in split_parts(first_part)]
    first = layouts[0]
    _check_parts(layouts)
    entries = [entry for entry in first.entries if not entry.key.startswith("split.")]
    alignment = first.alignment
    places: list[tuple[GgufLayout, TensorInfo, int]] = []
    position = 0
    for layout in layouts:
        for tensor in layout.tensors:
            position = _align(position, alignment)
            places.append((layout, tensor, position))
            position += tensor.nbytes
    header = [GGUF_MAGIC, struct.pack("<IQQ", first.version, len(places), len(entries))]
    with open(first.path, "rb") as handle:
        for entry in entries:
            handle.seek(entry.start)
            header.append(handle.read(entry.end - entry.start))
    for _, tensor, target in places:
        name = tensor.name.encode("utf-8")
        header.append(struct.pack("<Q", len(name)) + name + struct.pack("<I", len(tensor.dims)))
        header.append(struct.pack(f"<{len(tensor.dims)}Q", *tensor.dims))
        header.append(struct.pack("<IQ", tensor.ggml_type, target))
    head = b"".join(header)
    data_start = _align(len(head), alignment)
    total = data_start + position
    out = Path(out)
    for leftover in sweep_partials(out.parent, JOIN_PARTIAL):
        ctx.log(leftover.describe())
    progress = ctx.progress_reporter("join", total)
    temporary: Path | None = None
    try:
        fd, temporary = create_partial(out, JOIN_PARTIAL)
        with os.fdopen(fd, "wb") as writer:
            writer.write(head + bytes(data_start - len(head)))
            for layout, tensor, target in places:
                writer.write(bytes(data_start + target - writer.tell()))
                _copy(layout.path, layout.data_start + tensor.offset, tensor.nbytes, writer)
                progress.update(writer.tell())
            if writer.tell() != total:
                raise AssertionError("joined GGUF size differs from its plan")
        os.replace(temporary, out)
    except OSError as exc:
        if temporary is not None:
            temporary.unlink(missing_ok=True)
        raise GraftError(
            f"joining {first.path.name} into {out} failed ({exc.strerror or exc}); check the "
            f"free space of {out.parent} (the joined file is as large as all parts together)"
        ) from None
    except BaseException:
        if temporary is not None:
            temporary.unlink(missing_ok=True)
        raise
    return out


def _check_parts(layouts: list[GgufLayout]) -> None:
    first = layouts[0]
    count = first.value("split.count")
    total = first.value("split.tensors.count")
    tensors = sum(len(layout.tensors) for layout in layouts)
    if count != len(layouts) or (total is not None and total != tensors):
        raise GraftError(
            f"{first.path.name} says split.count = {count} and split.tensors.count = {total}, "
            f"but its {len(layouts)} parts hold {tensors} tensors; download the parts again"
        )


def _copy(source: Path, offset: int, count: int, writer: BinaryIO) -> None:
    with open(source, "rb") as reader:
        reader.seek(offset)
        while count:
            chunk = reader.read(min(count, COPY_BUFFER))
            if not chunk:
                raise GraftError(f"{source} ends early; download it again")
            writer.write(chunk)
            count -= len(chunk)


def _align(offset: int, alignment: int) -> int:
    return -(-offset // alignment) * alignment
