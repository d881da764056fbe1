"""A memory-bound stand-in for a model: the same GGUF with every FFN widened by zero channels.

Speculative decoding pays where a forward pass is limited by streaming weights, not by compute:
on a GPU, on Apple silicon, or with a model much larger than the CPU's cache. The bundled demo
model fits in L3, so on a CPU each extra verify row costs compute and deeper drafts look worse
than they would on a real model. Widening every FFN F× with zero channels (F−1 extra rows of
zeros in ffn_gate and ffn_up, F−1 extra zero columns per row of ffn_down) keeps the function
exactly — silu(0)·0 = 0 and a zero column adds nothing — so decoding yields the same tokens,
while each step streams F× the FFN bytes. All-zero bytes decode to zeros in every ggml block
format (every block's scale is zero), so quantised tensors are widened without requantising.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter

from app.engine.errors import RuntimeBackendError

_GATE_OR_UP = re.compile(r"blk\.\d+\.ffn_(gate|up)\.weight")
_DOWN = re.compile(r"blk\.\d+\.ffn_down\.weight")


def widened_tensor(name: str, data: np.ndarray, factor: int) -> np.ndarray:
    """``data`` (rows × row bytes or values, as GGUFReader gives it) with the zero channels."""
    if _GATE_OR_UP.fullmatch(name):  # one row per FFN channel: add rows
        return np.concatenate(
            [data, np.zeros((data.shape[0] * (factor - 1), *data.shape[1:]), data.dtype)]
        )
    if _DOWN.fullmatch(name):  # one row per output, FFN channels along it: add columns
        return np.concatenate(
            [data, np.zeros((data.shape[0], data.shape[1] * (factor - 1)), data.dtype)], axis=1
        )
    return data


def write_widened_gguf(source: Path, out: Path, factor: int) -> Path:
    """Write ``source`` with every dense FFN widened ``factor``× to ``out`` (temp name, rename)."""
    if factor < 1:
        raise RuntimeBackendError(f"--wide {factor} is invalid: use a whole factor ≥ 1, e.g. 24")
    reader = GGUFReader(source)
    architecture = reader.fields["general.architecture"].contents()
    ffn_key = f"{architecture}.feed_forward_length"
    if ffn_key not in reader.fields:
        raise RuntimeBackendError(f"{source.name} has no {ffn_key}: it cannot be widened")
    if not any(_DOWN.fullmatch(tensor.name) for tensor in reader.tensors):
        raise RuntimeBackendError(
            f"{source.name} has no dense FFN tensors (blk.N.ffn_down.weight); --wide needs a "
            "dense model (expert FFNs are not widened)"
        )
    writer_partial = out.with_name(f".{out.name}.{os.getpid()}.partial")
    writer = GGUFWriter(writer_partial, architecture)
    for field in reader.fields.values():
        if field.name == "general.architecture" or field.name.startswith("GGUF."):
            continue
        value_type = field.types[0]
        sub_type = field.types[-1] if value_type == GGUFValueType.ARRAY else None
        value = field.contents()
        if field.name == ffn_key:
            value = [v * factor for v in value] if isinstance(value, list) else value * factor
        writer.add_key_value(field.name, value, value_type, sub_type=sub_type)
    tensors = [
        (tensor, widened_tensor(tensor.name, tensor.data, factor)) for tensor in reader.tensors
    ]
    for tensor, data in tensors:
        writer.add_tensor_info(tensor.name, data.shape, data.dtype, data.nbytes, tensor.tensor_type)
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        for _tensor, data in tensors:
            writer.write_tensor_data(data)
        writer.close()
        os.replace(writer_partial, out)
    except BaseException:
        writer.close()
        writer_partial.unlink(missing_ok=True)
        raise
    return out


def widened_copy(source: Path, factor: int, folder: Path | None = None) -> Path:
    """The stand-in for ``source`` in ``folder`` (default: a new temporary folder)."""
    folder = folder or Path(tempfile.mkdtemp(prefix="mtp-studio-wide-"))
    return write_widened_gguf(source, folder / f"{source.stem}-wide{factor}.gguf", factor)
