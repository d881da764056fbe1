"""Finding, loading and fit-checking an MTP head's weights for a model loaded with mlx-lm.

Where the head comes from, in order: the ``--sidecar`` file; ``mtp.safetensors`` in the model
folder; the folder's own MTP tensors (a BF16 Hugging Face checkpoint keeps ``mtp.*``, which
mlx-lm's ``sanitize`` drops from the trunk). Any problem with the head — a sidecar of another
model (hidden size, vocabulary, head shapes), another architecture, a corrupt file — raises a
:class:`RuntimeBackendError` naming the file, the tensor and both shapes; the backend then runs
the trunk plainly with that message as the reason.

Qwen checkpoints store RMSNorm weights as offsets from 1 (the model computes x · (1 + w));
mlx-lm adds the 1 only for the trunk. The head's norms are checked rather than assumed: a mean
near 0 means offset style, so 1 is added (docs/formats.md#running-the-heads).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten
from safetensors import safe_open

from app.engine.bounded_json import parse_bounded_json
from app.engine.errors import RuntimeBackendError
from app.engine.runtime.backends.mlx.heads import (
    HEAD_STYLE_BY_MODEL_TYPE,
    NEXTN_STYLE,
    QWEN_STYLE,
    MtpHead,
    NextnMtpHead,
    QwenMtpHead,
)

SIDECAR_FILE = "mtp.safetensors"
_OFFSET_NORM_MEAN_LIMIT = 0.5
_LAYOUT_STYLE = {"qwen-mtp": QWEN_STYLE, "deepseek-nextn": NEXTN_STYLE, "mimo": "mimo"}
_NEXTN_FUSION = ("enorm.", "hnorm.", "eh_proj.", "shared_head.", "embed_tokens.")


@dataclass(frozen=True)
class HeadTensors:
    """The raw tensors of one MTP head, names relative to the head (``fc.weight``, …)."""

    style: str
    tensors: Mapping[str, mx.array]
    origin: str
    """Where they came from, for messages: ``sidecar /x/mtp.safetensors`` or the folder."""
    prefix: str
    """What the file puts before the relative names (``mtp.``, ``model.layers.8.``)."""


def model_type_of(folder: Path) -> str:
    """``model_type`` from the folder's config.json, with a clear error when it is missing."""
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise RuntimeBackendError(
            f"{folder} has no config.json, so it is not a Hugging Face or MLX model folder; "
            "choose the folder that holds config.json and the .safetensors weights"
        )
    try:
        config = parse_bounded_json(config_path.read_bytes())
    except (OSError, ValueError) as exc:
        raise RuntimeBackendError(f"{config_path} cannot be read as JSON ({exc})") from None
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if not isinstance(model_type, str):
        raise RuntimeBackendError(f"{config_path} has no 'model_type' field")
    return model_type


def head_style(model_type: str) -> str:
    """The head family for ``model_type``, or an error saying MTP is not supported for it."""
    style = HEAD_STYLE_BY_MODEL_TYPE.get(model_type)
    if style is None:
        supported = ", ".join(sorted(HEAD_STYLE_BY_MODEL_TYPE))
        raise RuntimeBackendError(
            f"the MLX backend has no MTP head for model_type '{model_type}' (supported: "
            f"{supported}); decoding runs without MTP"
        )
    return style


def read_head_tensors(
    folder: Path, sidecar: Path | None, style: str, trunk_layers: int
) -> HeadTensors | None:
    """The head's tensors from ``sidecar``, ``folder/mtp.safetensors`` or the folder's own."""
    if sidecar is None and (folder / SIDECAR_FILE).is_file():
        sidecar = folder / SIDECAR_FILE
    if sidecar is not None:
        return _read_sidecar(Path(sidecar), style)
    names_by_file = _checkpoint_names(folder)
    prefix = "mtp." if style == QWEN_STYLE else f"model.layers.{trunk_layers}."
    tensors: dict[str, mx.array] = {}
    for file, names in names_by_file.items():
        wanted = [name for name in names if _head_name(name, style, prefix) is not None]
        if wanted:
            loaded = mx.load(str(file))
            tensors.update({_head_name(name, style, prefix): loaded[name] for name in wanted})
            if style == QWEN_STYLE:
                prefix = wanted[0][: wanted[0].find("mtp.") + len("mtp.")]
    if not tensors:
        return None
    return HeadTensors(style, tensors, f"the MTP tensors inside {folder.name}", prefix)


def _head_name(name: str, style: str, prefix: str) -> str | None:
    if style == QWEN_STYLE:
        index = name.find("mtp.")
        if index == 0 or (index > 0 and name[index - 1] == "."):
            return name[index + len("mtp.") :]
        return None
    return name[len(prefix) :] if name.startswith(prefix) else None


def _checkpoint_names(folder: Path) -> dict[Path, list[str]]:
    files = sorted(folder.glob("*.safetensors"))
    names: dict[Path, list[str]] = {}
    for file in files:
        if file.name == SIDECAR_FILE:
            continue
        try:
            with safe_open(str(file), framework="numpy") as handle:
                names[file] = list(handle.keys())
        except Exception as exc:  # safetensors raises its own error types
            raise RuntimeBackendError(
                f"{file} is not a readable safetensors file ({exc})"
            ) from None
    return names


def _read_sidecar(path: Path, style: str) -> HeadTensors:
    if not path.is_file():
        raise RuntimeBackendError(
            f"the MTP sidecar {path} does not exist; pass the path of an mtp.safetensors file"
        )
    try:
        loaded, metadata = mx.load(str(path), return_metadata=True)
    except Exception as exc:  # mlx raises RuntimeError/ValueError for unreadable files
        raise RuntimeBackendError(
            f"the MTP sidecar {path} cannot be read ({exc}); it may be truncated or not a "
            "safetensors file — download or extract it again"
        ) from None
    layout = metadata.get("mtp_layout")
    if layout is not None and _LAYOUT_STYLE.get(layout, layout) != style:
        raise RuntimeBackendError(
            f"the MTP sidecar {path} holds a '{layout}' head but this model needs a "
            f"{style}-style head; use the sidecar made for this model"
        )
    if style == QWEN_STYLE:
        tensors = {_head_name(name, style, ""): value for name, value in loaded.items()}
        if None in tensors:
            stray = next(name for name in loaded if _head_name(name, style, "") is None)
            raise RuntimeBackendError(
                f"the MTP sidecar {path} has tensor '{stray}', not a Qwen-style mtp.* head; "
                "use the sidecar made for this model"
            )
        first = next(iter(loaded), "mtp.")
        prefix = first[: first.find("mtp.") + len("mtp.")]
    else:
        indices = sorted(
            {int(m.group(1)) for name in loaded if (m := re.match(r"model\.layers\.(\d+)\.", name))}
        )
        if (
            not indices
            or len(indices) != 1
            or not all(n.startswith("model.layers.") for n in loaded)
        ):
            raise RuntimeBackendError(
                f"the MTP sidecar {path} is not one NextN layer 'model.layers.N.*' (found layers "
                f"{indices}); use the sidecar made for this model"
            )
        prefix = f"model.layers.{indices[0]}."
        tensors = {name[len(prefix) :]: value for name, value in loaded.items()}
    return HeadTensors(style, tensors, f"sidecar {path}", prefix)


def build_head(model: nn.Module, head: HeadTensors) -> MtpHead:
    """An :class:`MtpHead` on ``model``'s trunk with ``head``'s weights, after checking they fit."""
    text_model = getattr(model, "language_model", model)
    args = text_model.args
    trunk = model.model
    layers = trunk.layers
    if head.style == QWEN_STYLE:
        attention_index = args.full_attention_interval - 1
        layer_class = type(layers[attention_index])
        tensors = _sanitized_block(
            model, _absolute_norms(head.tensors), "layers.0.", attention_index
        )
        module: QwenMtpHead | NextnMtpHead = QwenMtpHead(
            args.hidden_size, args.rms_norm_eps, layer_class(args, layer_idx=attention_index)
        )
    else:
        block = {
            name: value
            for name, value in head.tensors.items()
            if not name.startswith(_NEXTN_FUSION)
        }
        fusion = {name: value for name, value in head.tensors.items() if name not in block}
        last = len(layers) - 1
        tensors = {
            **fusion,
            **{f"layer.{k}": v for k, v in _sanitized_block(model, block, "", last).items()},
        }
        module = NextnMtpHead(
            args.hidden_size,
            args.vocab_size,
            args.rms_norm_eps,
            type(layers[last])(args, layer_idx=len(layers)),
            own_head="shared_head.head.weight" in tensors,
            own_embedding="embed_tokens.weight" in tensors,
        )
    _check_fit(module, tensors, head)
    module.load_weights(list(tensors.items()))
    module.eval()
    mx.eval(module.parameters())
    embed = getattr(module, "embed_tokens", trunk.embed_tokens)
    own_head = getattr(getattr(module, "shared_head", None), "head", None)
    if own_head is not None:
        project = own_head
    elif getattr(args, "tie_word_embeddings", False) or "lm_head" not in text_model:
        project = trunk.embed_tokens.as_linear
    else:
        project = text_model.lm_head
    return MtpHead(module, embed, project)


def _sanitized_block(
    model: nn.Module, tensors: Mapping[str, mx.array], block_prefix: str, trunk_index: int
) -> dict[str, mx.array]:
    """Run the block's tensors through mlx-lm's own ``sanitize`` as trunk layer ``trunk_index``.

    That applies the family's checkpoint conversions (stacked experts, DeepSeek's split of
    ``kv_b_proj``, FP8 scales) without copying them. Norm weights bypass it (some families add
    the Qwen offset there; :func:`_absolute_norms` decides that for the head as a whole).
    """
    layer_prefix = f"model.layers.{trunk_index}."

    def converted(name: str, value: mx.array) -> bool:
        return name.startswith(block_prefix) and not _is_norm(name, value)

    block = {
        layer_prefix + name[len(block_prefix) :]: value
        for name, value in tensors.items()
        if converted(name, value)
    }
    rest = {name: value for name, value in tensors.items() if not converted(name, value)}
    marker = f"layers.{trunk_index}."
    sanitized: dict[str, mx.array] = {}
    for name, value in model.sanitize(block).items():
        at = name.find(marker)
        sanitized[block_prefix + name[at + len(marker) :] if at >= 0 else name] = value
    return {**rest, **sanitized}


def _absolute_norms(tensors: Mapping[str, mx.array]) -> dict[str, mx.array]:
    """Add 1 to every RMSNorm weight when the head stores them as offsets (mean near 0)."""
    norms = [name for name, value in tensors.items() if _is_norm(name, value)]
    if not norms:
        return dict(tensors)
    means = [mx.mean(tensors[name].astype(mx.float32)).item() for name in norms]
    if sum(means) / len(means) >= _OFFSET_NORM_MEAN_LIMIT:
        return dict(tensors)
    return {
        name: (value.astype(mx.float32) + 1.0).astype(value.dtype) if name in norms else value
        for name, value in tensors.items()
    }


def _is_norm(name: str, value: mx.array) -> bool:
    """An RMSNorm weight: a vector whose module name mentions ``norm`` (``pre_fc_norm_hidden``)."""
    parts = name.split(".")
    return value.ndim == 1 and parts[-1] == "weight" and len(parts) > 1 and "norm" in parts[-2]


def _check_fit(module: nn.Module, tensors: Mapping[str, Any], head: HeadTensors) -> None:
    expected = dict(tree_flatten(module.parameters()))
    origin = head.origin

    def stored(name: str) -> str:
        """The tensor's name in the file (NextN block tensors sit under ``layer.`` here)."""
        relative = name.removeprefix("layer.") if head.style == NEXTN_STYLE else name
        return head.prefix + relative

    for name, value in tensors.items():
        if name not in expected:
            raise RuntimeBackendError(
                f"{origin}: tensor '{stored(name)}' (shape {tuple(value.shape)}) has no place in "
                "this model's MTP head; the head was made for another architecture"
            )
        want, have = tuple(expected[name].shape), tuple(value.shape)
        if want != have:
            raise RuntimeBackendError(
                f"{origin}: tensor '{stored(name)}' has shape {have} but this model's MTP head "
                f"needs {want}; the sidecar was made for another model (hidden size, vocabulary or "
                "head shapes differ) — use the sidecar made for this model"
            )
    missing = sorted(set(expected) - set(tensors))
    if missing:
        raise RuntimeBackendError(
            f"{origin}: the MTP head lacks {len(missing)} tensor(s), e.g. '{stored(missing[0])}' "
            f"(shape {tuple(expected[missing[0]].shape)}); the file is incomplete or made for "
            "another architecture"
        )
