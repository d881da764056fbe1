"""Stand-ins for larger models: the same GGUF with wider FFNs, or with a real-sized vocabulary.

Speculative decoding pays where a forward pass is limited by streaming weights, not by compute:
on a GPU, on Apple silicon, or with a model much larger than the CPU's cache. The bundled demo
model fits in L3, so on a CPU each extra verify row costs compute and deeper drafts look worse
than they would on a real model. Widening every FFN F× with zero channels (F−1 extra rows of
zeros in ffn_gate and ffn_up, F−1 extra zero columns per row of ffn_down) keeps the function
exactly — silu(0)·0 = 0 and a zero column adds nothing — so decoding yields the same tokens,
while each step streams F× the FFN bytes. All-zero bytes decode to zeros in every ggml block
format (every block's scale is zero), so quantised tensors are widened without requantising.

The demo's 4k-token vocabulary also hides what a real one costs the loop around the model: every
step hands over one logits row per output, 152k floats for Qwen3 and 248–262k for Qwen3.5/3.6 and
Gemma. The vocabulary stand-in pads the vocabulary to V tokens as llama.cpp's converter pads a
model's unused vocabulary slots (``[PADn]``, token type unused: no text produces them), with zero
rows in the token embedding and the output head. Their logit is exactly 0, so the model's choices
are unchanged wherever its real candidates score above 0 — greedy decoding whenever the top logit
is positive, top-k sampling whenever the k-th is — while each step computes and returns a V-wide
row. (Without top-k, V − n tokens tied at 0 take real mass: the stand-in measures cost there, not
text.)
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter

from app.engine.errors import RuntimeBackendError

_GATE_OR_UP = re.compile(r"blk\.\d+\.ffn_(gate|up)\.weight")
_DOWN = re.compile(r"blk\.\d+\.ffn_down\.weight")
_VOCABULARY_ROWS = re.compile(
    r"token_embd\.weight|output\.weight|blk\.\d+\.nextn\.(embed_tokens|shared_head_head)\.weight"
)
_TOKENS = "tokenizer.ggml.tokens"
_TOKEN_TYPES = "tokenizer.ggml.token_type"
_TOKEN_SCORES = "tokenizer.ggml.scores"
_UNUSED_TOKEN = 5  # gguf.TokenType.UNUSED, what llama.cpp's converter gives padding slots


def widened_tensor(name: str, data: np.ndarray, factor: int, vocab: int = 0) -> np.ndarray:
    """``data`` (rows × row bytes or values, as GGUFReader gives it) with the zero channels, and
    zero rows up to ``vocab`` tokens for a tensor with one row per token."""
    if vocab > data.shape[0] and _VOCABULARY_ROWS.fullmatch(name):
        return np.concatenate(
            [data, np.zeros((vocab - data.shape[0], *data.shape[1:]), data.dtype)]
        )
    if _GATE_OR_UP.fullmatch(name):  # one row per FFN channel: add rows
        return np.concatenate(
            [data, np.zeros((data.shape[0] * (factor - 1), *data.shape[1:]), data.dtype)]
        )
    if _DOWN.fullmatch(name):  # one row per output, FFN channels along it: add columns
        return np.concatenate(
            [data, np.zeros((data.shape[0], data.shape[1] * (factor - 1)), data.dtype)], axis=1
        )
    return data


def write_widened_gguf(source: Path, out: Path, factor: int, vocab: int = 0) -> Path:
    """Write ``source`` with every dense FFN widened ``factor``× and (``vocab`` > 0) the
    vocabulary padded to ``vocab`` tokens to ``out`` (temp name, rename)."""
    if factor < 1:
        raise RuntimeBackendError(f"--wide {factor} is invalid: use a whole factor ≥ 1, e.g. 24")
    reader = GGUFReader(source)
    architecture = reader.fields["general.architecture"].contents()
    ffn_key = f"{architecture}.feed_forward_length"
    if factor > 1 and ffn_key not in reader.fields:
        raise RuntimeBackendError(f"{source.name} has no {ffn_key}: it cannot be widened")
    if factor > 1 and not any(_DOWN.fullmatch(tensor.name) for tensor in reader.tensors):
        raise RuntimeBackendError(
            f"{source.name} has no dense FFN tensors (blk.N.ffn_down.weight); --wide needs a "
            "dense model (expert FFNs are not widened)"
        )
    padding = _vocabulary_padding(reader, source, vocab)
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
        if field.name in padding:
            value = [*value, *padding[field.name]]
        writer.add_key_value(field.name, value, value_type, sub_type=sub_type)
    tensors = [
        (tensor, widened_tensor(tensor.name, tensor.data, factor, vocab))
        for tensor in reader.tensors
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


def _vocabulary_padding(reader: GGUFReader, source: Path, vocab: int) -> dict[str, list[Any]]:
    """The entries each per-token tokenizer array gets to reach ``vocab`` tokens ({}: none)."""
    if not vocab:
        return {}
    if _TOKENS not in reader.fields:
        raise RuntimeBackendError(
            f"{source.name} has no {_TOKENS}: its vocabulary cannot be padded"
        )
    size = len(reader.fields[_TOKENS].contents())
    if vocab < size:
        raise RuntimeBackendError(
            f"--vocab {vocab} is smaller than {source.name}'s vocabulary of {size} tokens; give "
            "a larger size, e.g. 151936 (Qwen3) or 262144"
        )
    count = vocab - size
    padding: dict[str, list[Any]] = {
        _TOKENS: [f"[PAD{token}]" for token in range(size, vocab)],
        _TOKEN_TYPES: [_UNUSED_TOKEN] * count,
    }
    if _TOKEN_SCORES in reader.fields:
        padding[_TOKEN_SCORES] = [0.0] * count
    return padding


def widened_copy(source: Path, factor: int, folder: Path | None = None, *, vocab: int = 0) -> Path:
    """The stand-in for ``source`` in ``folder`` (default: a new temporary folder)."""
    folder = folder or Path(tempfile.mkdtemp(prefix="mtp-studio-wide-"))
    name = (
        source.stem + (f"-wide{factor}" if factor > 1 else "") + (f"-vocab{vocab}" if vocab else "")
    )
    return write_widened_gguf(source, folder / f"{name}.gguf", factor, vocab)
