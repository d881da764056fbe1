"""What format a model on disk is in, and how its weights are quantised, for the library's columns.

The chat's :class:`~app.engine.chat.model_files.ModelDescription` tells a GGUF file from a model
folder; the library also tells an MLX conversion from a Hugging Face checkpoint and names the
quantisation a user picks downloads by (``Q8_0``, ``Q4_K_M``, ``4-bit``, ``BF16``, ``FP8``):

- GGUF: the header's ``general.file_type`` (llama.cpp's file type, e.g. ``MOSTLY_Q8_0``);
- MLX (``mlx_lm.convert`` writes ``{"format": "mlx"}`` into the safetensors metadata and a
  ``quantization`` block into config.json): the bits and group size, else the dtype;
- Hugging Face: ``quantization_config.quant_method`` (with its bits when given), else the dtype.

Only headers and config.json are read; anything unreadable gives an empty quantisation, never
an error (the chat's description already carries the readable problem).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gguf import LlamaFileType
from safetensors import SafetensorError, safe_open

from app.engine.bounded_json import parse_bounded_json
from app.engine.chat.model_files import GGUF, ModelDescription
from app.engine.errors import MtpStudioError
from app.engine.gguf_header import read_gguf_header

GGUF_FORMAT = "GGUF"
MLX_FORMAT = "MLX"
HF_FORMAT = "Safetensors (Hugging Face)"
UNKNOWN = ""

_DTYPES = {
    "bfloat16": "BF16",
    "float16": "F16",
    "half": "F16",
    "float32": "F32",
    "float": "F32",
    "float8_e4m3fn": "FP8",
}


@dataclass(frozen=True)
class ModelFormat:
    """``format``: GGUF / MLX / Safetensors (Hugging Face); ``quantisation``: e.g. ``Q8_0``."""

    format: str
    quantisation: str


def model_format(description: ModelDescription) -> ModelFormat:
    """The format and quantisation of the model ``description`` describes."""
    if description.kind == GGUF:
        return ModelFormat(GGUF_FORMAT, gguf_quantisation(description.path))
    config = _config(description.path)
    if _is_mlx(description.path, config):
        return ModelFormat(MLX_FORMAT, _mlx_quantisation(config))
    return ModelFormat(HF_FORMAT, _hf_quantisation(config))


def gguf_quantisation(path: Path) -> str:
    """llama.cpp's file type without its ``MOSTLY_`` prefix (``Q8_0``, ``BF16``, ``F32``)."""
    try:
        file_type = read_gguf_header(path).metadata.get("general.file_type")
        name = LlamaFileType(int(file_type)).name if isinstance(file_type, int) else UNKNOWN
    except (MtpStudioError, ValueError):
        return UNKNOWN
    if name == "GUESSED":
        return UNKNOWN
    return name.removeprefix("MOSTLY_").removeprefix("ALL_")


def _config(folder: Path) -> dict[str, Any]:
    try:
        config = parse_bounded_json((folder / "config.json").read_bytes())
    except (OSError, ValueError):  # unreadable, not JSON, or past the size or depth limits
        return {}
    return config if isinstance(config, dict) else {}


def _is_mlx(folder: Path, config: dict[str, Any]) -> bool:
    if isinstance(config.get("quantization"), dict):
        return True
    shards = sorted(folder.glob("*.safetensors"))
    weights = [shard for shard in shards if shard.name != "mtp.safetensors"]
    return bool(weights) and safetensors_metadata(weights[0]).get("format") == "mlx"


def safetensors_metadata(path: Path) -> dict[str, str]:
    """The ``__metadata__`` block of a safetensors file (empty when absent or unreadable), read
    by the safetensors library's own bounded header parser."""
    try:
        with safe_open(str(path), framework="numpy") as handle:
            return handle.metadata() or {}
    except (OSError, SafetensorError):
        return {}


def _dtype(config: dict[str, Any]) -> str:
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    for source in (config, text):
        for key in ("torch_dtype", "dtype"):
            value = source.get(key)
            if isinstance(value, str):
                return _DTYPES.get(value.lower(), value.upper())
    return UNKNOWN


def _mlx_quantisation(config: dict[str, Any]) -> str:
    quantization = config.get("quantization")
    if isinstance(quantization, dict) and isinstance(quantization.get("bits"), int):
        group = quantization.get("group_size")
        suffix = f" (group {group})" if isinstance(group, int) else ""
        return f"{quantization['bits']}-bit{suffix}"
    return _dtype(config)


def _hf_quantisation(config: dict[str, Any]) -> str:
    quantization = config.get("quantization_config")
    if isinstance(quantization, dict) and isinstance(quantization.get("quant_method"), str):
        method = quantization["quant_method"].upper()
        bits = quantization.get("bits")
        return f"{method} {bits}-bit" if isinstance(bits, int) else method
    return _dtype(config)
