"""What a drafter model and its target say about themselves, read from headers only.

Gemma 4's MTP drafter is a model of its own (docs/drafters.md): transformers ``model_type``
``gemma4_assistant``, GGUF ``general.architecture`` ``gemma4-assistant``. A file is a drafter
because its architecture says so — never because of its name (``mtp-gemma-4-26B-A4B-it.gguf``,
``gemma-4-E2B-it-assistant-Q8_0.gguf`` and ``model.gguf`` are all possible names).

Pairing a drafter with a target needs the few numbers its forward pass depends on: the target's
hidden width (the drafter's ``backbone_hidden_size`` / GGUF ``embedding_length_out``: it reads the
target's hidden state), the vocabulary (it drafts the target's tokens), and the shape of the
keys and values it reads from the target's cache — head size and KV head count of the target's
last full-attention and last sliding-window layers (llama.cpp binds the drafter's full layers to
the target's layer n−1 and its sliding ones to layer n−2). :mod:`app.engine.drafter.pairing`
compares them. Everything here reads a GGUF header or a ``config.json``, never tensors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.engine.bounded_json import parse_bounded_json
from app.engine.errors import DrafterError, MtpStudioError
from app.engine.gguf_header import LongArray, read_gguf_header

DRAFTER_ARCHITECTURES = {"gemma4-assistant": frozenset({"gemma4"})}
"""GGUF drafter architecture → the GGUF architectures of the targets it drafts for."""
DRAFTER_MODEL_TYPES = {"gemma4_assistant": frozenset({"gemma4", "gemma4_text"})}
"""transformers drafter ``model_type`` → the ``model_type`` values of its targets."""
DRAFTER_CLASSES = frozenset({"Gemma4AssistantForCausalLM", "Gemma4UnifiedAssistantForCausalLM"})
DRAFTER_REASON = (
    "{name} is a drafter ({architecture}): it drafts for another model and cannot chat on its "
    "own; open its target model instead, which finds the drafter beside it"
)
"""Why a drafter opened as a model is refused (the picker's note and the backends' error)."""
GEMMA4_DEFAULT_GLOBAL_HEAD_DIM = 512
"""transformers' Gemma4TextConfig default for ``global_head_dim`` (full-attention head size)."""


@dataclass(frozen=True)
class KvShape:
    """Head size and KV head count of one attention type (``full`` or ``sliding``)."""

    head_size: int
    kv_heads: int

    def __str__(self) -> str:
        return f"{self.kv_heads}×{self.head_size}"


@dataclass(frozen=True)
class ModelFacts:
    """A target or a drafter as pairing sees it. For a drafter, ``width`` is the target width
    it was made for (``backbone_hidden_size``); ``full``/``sliding`` are the KV shapes it reads
    (drafter) or offers in its last layers of that type (target)."""

    path: Path
    architecture: str
    drafter: bool
    width: int
    vocab_size: int
    full: KvShape | None
    sliding: KvShape | None
    note: str | None = None
    """Why the target cannot serve a drafter at all (layer order), None when it can."""


def is_drafter_architecture(architecture: object) -> bool:
    return isinstance(architecture, str) and architecture in DRAFTER_ARCHITECTURES


def is_drafter_config(config: Mapping[str, Any]) -> bool:
    """Whether a transformers ``config.json`` is a drafter's (its model type or class)."""
    architectures = config.get("architectures")
    named = isinstance(architectures, list) and any(a in DRAFTER_CLASSES for a in architectures)
    return config.get("model_type") in DRAFTER_MODEL_TYPES or named


def is_drafter_metadata(metadata: Mapping[str, Any]) -> bool:
    return is_drafter_architecture(metadata.get("general.architecture"))


def read_facts(path: Path) -> ModelFacts:
    """The facts of the GGUF file or model folder at ``path`` (DrafterError when unreadable)."""
    path = Path(path)
    try:
        if path.is_dir():
            return facts_from_config(path, _read_config(path))
        return facts_from_gguf(path, read_gguf_header(path).metadata)
    except DrafterError:
        raise
    except MtpStudioError as exc:
        raise DrafterError(str(exc)) from None


def _read_config(folder: Path) -> dict[str, Any]:
    config_path = folder / "config.json"
    try:
        config = parse_bounded_json(config_path.read_bytes())
    except (OSError, ValueError) as exc:
        raise DrafterError(f"{config_path} cannot be read ({exc}); re-download it") from None
    if not isinstance(config, dict):
        raise DrafterError(f"{config_path} is not a JSON object; re-download it")
    return config


def facts_from_gguf(path: Path, metadata: Mapping[str, Any]) -> ModelFacts:
    architecture = metadata.get("general.architecture")
    if not isinstance(architecture, str):
        raise DrafterError(f"{path} has no general.architecture key; re-convert it")

    def number(key: str, default: int = 0) -> int:
        value = metadata.get(f"{architecture}.{key}", default)
        return int(value) if isinstance(value, int | float) else default

    drafter = is_drafter_architecture(architecture)
    tokens = metadata.get("tokenizer.ggml.tokens")
    vocab = number("vocab_size") or (tokens.count if isinstance(tokens, LongArray) else 0)
    if isinstance(tokens, list):
        vocab = vocab or len(tokens)
    pattern = metadata.get(f"{architecture}.attention.sliding_window_pattern")
    swa = [bool(flag) for flag in pattern] if isinstance(pattern, list) else []
    kv_heads = metadata.get(f"{architecture}.attention.head_count_kv")
    full_length = number("attention.key_length")
    sliding_length = number("attention.key_length_swa", full_length)
    note = None
    if drafter:
        layer_full = next((i for i, flag in enumerate(swa) if not flag), None)
        layer_sliding = next((i for i, flag in enumerate(swa) if flag), None)
    else:
        layer_full, layer_sliding = len(swa) - 1, len(swa) - 2
        if len(swa) < 2 or swa[-1] or not swa[-2]:
            note = (
                "its last two layers are not a sliding-window then a full-attention layer, "
                "which a Gemma 4 drafter reads"
            )
    return ModelFacts(
        path=path,
        architecture=architecture,
        drafter=drafter,
        width=number("embedding_length_out") if drafter else number("embedding_length"),
        vocab_size=vocab,
        full=_kv(full_length, kv_heads, layer_full),
        sliding=_kv(sliding_length, kv_heads, layer_sliding),
        note=note,
    )


def _kv(head_size: int, kv_heads: object, layer: int | None) -> KvShape | None:
    if layer is None or layer < 0 or not head_size:
        return None
    if isinstance(kv_heads, list):
        if layer >= len(kv_heads) or not isinstance(kv_heads[layer], int):
            return None
        return KvShape(head_size, kv_heads[layer])
    return KvShape(head_size, int(kv_heads)) if isinstance(kv_heads, int) else None


def facts_from_config(folder: Path, config: Mapping[str, Any]) -> ModelFacts:
    drafter = is_drafter_config(config)
    text = config.get("text_config")
    text = text if isinstance(text, dict) else {}
    merged = {**config, **text}
    layer_types = merged.get("layer_types")
    kinds = [str(kind) for kind in layer_types] if isinstance(layer_types, list) else []
    note = None
    if not drafter and (len(kinds) < 2 or kinds[-1] != "full_attention" or kinds[-2] == kinds[-1]):
        note = (
            "its last two layers are not a sliding-window then a full-attention layer, which "
            "a Gemma 4 drafter reads"
        )
    if drafter:
        full_layer = next((i for i, kind in enumerate(kinds) if kind == "full_attention"), None)
        sliding_layer = next((i for i, kind in enumerate(kinds) if kind != "full_attention"), None)
    else:
        full_layer, sliding_layer = len(kinds) - 1, len(kinds) - 2
    model_type = str(config.get("model_type") or text.get("model_type") or "")
    return ModelFacts(
        path=folder,
        architecture=model_type,
        drafter=drafter,
        width=_int(merged, "backbone_hidden_size" if drafter else "hidden_size"),
        vocab_size=_int(merged, "vocab_size"),
        full=_config_kv(merged, full_layer, full=True),
        sliding=_config_kv(merged, sliding_layer, full=False),
        note=note,
    )


def _int(config: Mapping[str, Any], key: str, default: int = 0) -> int:
    value = config.get(key)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def _config_kv(config: Mapping[str, Any], layer: int | None, *, full: bool) -> KvShape | None:
    """A layer's KV shape as transformers builds it: ``per_layer_config`` overrides (how 5.23
    saves), else Google's keys — ``global_head_dim`` and, with ``attention_k_eq_v`` (or without
    the key), ``num_global_key_value_heads`` for full layers — else ``head_dim`` and
    ``num_key_value_heads``."""
    if layer is None or layer < 0:
        return None
    head_size = _int(config, "head_dim")
    kv_heads = _int(config, "num_key_value_heads", _int(config, "num_attention_heads"))
    if full:
        head_size = _int(config, "global_head_dim", GEMMA4_DEFAULT_GLOBAL_HEAD_DIM)
        global_heads = config.get("num_global_key_value_heads")
        if isinstance(global_heads, int) and config.get("attention_k_eq_v", True):
            kv_heads = global_heads
    overrides = config.get("per_layer_config")
    override = overrides.get(str(layer)) if isinstance(overrides, dict) else None
    if isinstance(override, dict):
        head_size = _int(override, "head_dim", head_size)
        kv_heads = _int(override, "num_key_value_heads", kv_heads)
    return KvShape(head_size, kv_heads) if head_size else None
