"""Base GGUFs for the graft tests, made from the shipped demo GGUF with the ``gguf`` package.

A trunk-only base is what most published GGUFs are: the demo GGUF with its MTP block removed,
``block_count`` one lower, no ``nextn_predict_layers`` and the per-layer recurrent flags cut to
the trunk. It is written by gguf-py's own reader and writer (not by the graft's code), so a graft
that restores the head is checked against an independent construction. The Q4_0 variant is the
same trunk requantised by llama.cpp's own quantiser.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import llama_cpp
import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter

from app.engine.runtime.backends.llama_cpp import log as llama_cpp_log

DEMO_GGUF = Path(__file__).resolve().parents[2] / "resources" / "models" / "demo-mtp.gguf"
DEMO_FP8 = DEMO_GGUF.parent / "demo-mtp-fp8"
DEMO_HF = DEMO_GGUF.parent / "demo-mtp-hf"
ARCH = "qwen35"
HEAD_BLOCK = 8


def write_trunk_only(source: Path, out: Path) -> Path:
    """``source`` without its MTP block, written with gguf-py's GGUFWriter."""
    reader = GGUFReader(source)
    writer = GGUFWriter(out, ARCH)
    trunk = int(reader.fields[f"{ARCH}.block_count"].contents()) - 1
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        if key == f"{ARCH}.nextn_predict_layers":
            continue
        value = field.contents()
        if key == f"{ARCH}.block_count":
            value = trunk
        elif key == f"{ARCH}.attention.recurrent_layers":
            value = value[:trunk]
        kind = field.types[0]
        sub = field.types[-1] if kind == GGUFValueType.ARRAY else None
        writer.add_key_value(key, value, kind, sub_type=sub)
    for tensor in reader.tensors:
        if tensor.name.startswith(f"blk.{HEAD_BLOCK}."):
            continue
        writer.add_tensor(tensor.name, np.asarray(tensor.data), raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def write_head_only(source: Path, out: Path) -> Path:
    """``source``'s MTP head as its own file, shaped as llama.cpp's ``convert_hf_to_gguf.py --mtp``
    writes ``mtp-<model>.gguf``: every metadata entry (``block_count`` and
    ``nextn_predict_layers`` counting the head), the head block's tensors and the shared
    ``token_embd``/``output_norm``/``output`` — and no trunk block."""
    reader = GGUFReader(source)
    writer = GGUFWriter(out, ARCH)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), kind, sub_type=sub)
    for tensor in reader.tensors:
        if tensor.name.startswith("blk.") and not tensor.name.startswith(f"blk.{HEAD_BLOCK}."):
            continue
        writer.add_tensor(tensor.name, np.asarray(tensor.data), raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def write_retyped_head(source: Path, out: Path, type_name: str, tensor: str) -> Path:
    """``source``'s head file (as :func:`write_head_only`) with ``tensor`` stored as
    ``type_name``: random bytes sized for that type, as a hostile or broken head file would."""
    kind = GGMLQuantizationType[type_name]
    reader, writer = GGUFReader(source), GGUFWriter(out, ARCH)
    for key, field in reader.fields.items():
        if not key.startswith("GGUF.") and key != "general.architecture":
            sub = field.types[-1] if field.types[0] == GGUFValueType.ARRAY else None
            writer.add_key_value(key, field.contents(), field.types[0], sub_type=sub)
    for stored in reader.tensors:
        if stored.name.startswith("blk.") and not stored.name.startswith(f"blk.{HEAD_BLOCK}."):
            continue
        if stored.name == tensor:
            block, size = GGML_QUANT_SIZES[kind]
            width, rows = int(stored.shape[0]), int(np.prod(stored.shape[1:]))
            noise = np.random.default_rng(0).integers(0, 255, (rows, width // block * size))
            writer.add_tensor(stored.name, noise.astype(np.uint8), raw_dtype=kind)
        else:
            writer.add_tensor(stored.name, np.asarray(stored.data), raw_dtype=stored.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def requantise(source: Path, out: Path, file_type: int) -> Path:
    """``source`` requantised by llama.cpp's own quantiser (``llama_model_quantize``)."""
    llama_cpp_log.install()
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = file_type
    params.allow_requantize = True
    params.nthread = 1
    status = llama_cpp.llama_model_quantize(
        str(source).encode(), str(out).encode(), ctypes.byref(params)
    )
    if status != 0:
        raise RuntimeError(f"llama_model_quantize failed with {status}")
    return out
