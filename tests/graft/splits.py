"""Split GGUFs for tests, written by gguf-py's own writer (as llama.cpp's ``gguf-split`` lays
them out: every entry in the first part, ``split.*`` keys in each, tensors spread over parts)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter


def write_split(source: Path, out: Path, tensors_per_part: int) -> list[Path]:
    """``source`` split into parts named ``<out stem>-0000N-of-0000M.gguf``; returns the parts."""
    reader = GGUFReader(source)
    arch = str(reader.fields["general.architecture"].contents())
    writer = GGUFWriter(out, arch, split_max_tensors=tensors_per_part)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), kind, sub_type=sub)
    for tensor in reader.tensors:
        writer.add_tensor(tensor.name, np.asarray(tensor.data), raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return sorted(out.parent.glob(f"{out.stem}-*-of-*.gguf"))
