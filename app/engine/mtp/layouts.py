"""Which tensor names are a checkpoint's MTP heads, and whether they are all there.

Layouts (docs/formats.md#layouts-in-a-checkpoint), tried in this order:

* ``qwen-mtp`` — any key starting ``mtp.`` or containing ``.mtp.`` (Qwen3.5/3.6/Next, DeepSeek V4,
  LongCat, MiMo-V2, Nemotron-H, EXAONE …): layer ``i`` is ``mtp.layers.{i}.`` or ``mtp.{i}.``;
* ``ernie-mtp`` — ERNIE 4.5: ``model.mtp_emb_norm.{i}``, ``model.mtp_hidden_norm.{i}``,
  ``model.mtp_linear_proj.{i}``, ``model.mtp_block.{i}.*``;
* ``mimo`` — ``model.mtp_layers.{i}.*``;
* ``deepseek-nextn`` — ``num_nextn_predict_layers`` in config.json (top level or ``text_config``):
  every layer ``{num_hidden_layers + i}`` for ``i < num_nextn_predict_layers``, under the prefix
  the trunk uses: ``model.layers.``, or the multimodal wrappers' ``model.language_model.layers.``
  and ``language_model.model.layers.`` (Kimi K2.5, whose config sits under ``text_config``).

Each match is compared with the layer count the config declares (``mtp_num_hidden_layers``,
``num_nextn_predict_layers``): layers declared but absent are reported, so a checkpoint with an
incomplete index is never extracted short without a word. A declared count above
:data:`MAX_DECLARED_LAYERS` is refused before anything is built from it (a config claiming
10^12 layers would otherwise grow a list of missing layers until memory runs out). The family
(the config's ``model_type``) is recorded too, since one layout serves many families.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.engine.errors import ExtractError

LAYOUT_QWEN = "qwen-mtp"
LAYOUT_ERNIE = "ernie-mtp"
LAYOUT_MIMO = "mimo"
LAYOUT_NEXTN = "deepseek-nextn"

QWEN_COUNT_KEYS = ("mtp_num_hidden_layers", "num_nextn_predict_layers")
NEXTN_COUNT_KEY = "num_nextn_predict_layers"
MAX_DECLARED_LAYERS = 64
"""Real releases declare 1 to 3 MTP layers; a larger count is a damaged or hostile config.json."""
NEXTN_PREFIXES = ("model.layers.", "model.language_model.layers.", "language_model.model.layers.")

_QWEN_LAYER = re.compile(r"(?:^|\.)mtp\.(?:layers\.)?(\d+)\.")
_ERNIE_LAYER = re.compile(r"^model\.mtp_(?:emb_norm|hidden_norm|linear_proj|block)\.(\d+)\.")
_MIMO_LAYER = re.compile(r"^model\.mtp_layers\.(\d+)\.")


@dataclass(frozen=True)
class LayoutMatch:
    """The MTP tensors found, their layer numbers, and the layers the config declares."""

    layout: str
    family: str
    """The config's ``model_type`` (or architecture), e.g. ``longcat_flash``; else ``unknown``."""
    layer_indices: tuple[int, ...]
    names: tuple[str, ...]
    declared: str | None
    """How the config declares the count, e.g. ``num_nextn_predict_layers = 2`` (None: silent)."""
    missing: tuple[int, ...]
    """Layer numbers the config declares that have no tensor in the checkpoint."""
    prefix: str
    """Where a layer's tensors start, with ``{i}`` for its number (for messages)."""


def find_layout(label: str, names: list[str], config: Mapping[str, Any]) -> LayoutMatch:
    """The MTP layout of ``names``; raises :class:`ExtractError` when there are no heads."""
    family = config_family(config)
    qwen = [n for n in names if n.startswith("mtp.") or ".mtp." in n]
    if qwen:
        first = next((m for n in qwen if (m := _QWEN_LAYER.search(n))), None)
        prefix = first.string[: first.start(1)].lstrip(".") if first else "mtp.layers."
        return _numbered(
            label, LAYOUT_QWEN, family, qwen, _QWEN_LAYER, config, QWEN_COUNT_KEYS, prefix
        )
    for layout, pattern, prefix in (
        (LAYOUT_ERNIE, _ERNIE_LAYER, "model.mtp_block."),
        (LAYOUT_MIMO, _MIMO_LAYER, "model.mtp_layers."),
    ):
        found = [n for n in names if pattern.match(n)]
        if found:
            return _numbered(
                label, layout, family, found, pattern, config, (NEXTN_COUNT_KEY,), prefix
            )
    return _nextn(label, family, names, config)


def config_family(config: Mapping[str, Any]) -> str:
    for scope in _scopes(config):
        if isinstance(scope.get("model_type"), str) and scope["model_type"]:
            return scope["model_type"]
    architectures = config.get("architectures")
    if isinstance(architectures, list) and architectures and isinstance(architectures[0], str):
        return architectures[0]
    return "unknown"


def trunk_layer_count(config: Mapping[str, Any]) -> int | None:
    return next((v for _key, v in _declared(config, ("num_hidden_layers",))), None)


def no_heads_message(label: str, config: Mapping[str, Any] | None = None) -> str:
    trunk = trunk_layer_count(config or {})
    layer = f"model.layers.{trunk}.*" if trunk is not None else "model.layers.{N}.*"
    return (
        f"no MTP head tensors found in {label}; confirm this model has native MTP heads "
        f"(checked for mtp.* keys and {layer} via config.json). "
        "mlx-converted and other converted or quantised copies have their MTP tensors stripped "
        "by the converter: point at the original release (e.g. Qwen/…, deepseek-ai/…) instead"
    )


def _scopes(config: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    text_config = config.get("text_config")
    return [config] + ([text_config] if isinstance(text_config, dict) else [])


def _declared(config: Mapping[str, Any], keys: tuple[str, ...]) -> list[tuple[str, int]]:
    """``(key, value)`` for each of ``keys`` set to a non-negative int, top level first."""
    found = []
    for scope in _scopes(config):
        for key in keys:
            value = scope.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                found.append((key, value))
    return found


def _numbered(
    label: str,
    layout: str,
    family: str,
    names: list[str],
    pattern: re.Pattern[str],
    config: Mapping[str, Any],
    count_keys: tuple[str, ...],
    prefix: str,
) -> LayoutMatch:
    layers = tuple(sorted({int(m.group(1)) for n in names if (m := pattern.search(n))}))
    declared = next(iter(_declared(config, count_keys)), None)
    if declared is not None:
        _check_declared_count(label, declared, len(layers))
    missing: tuple[int, ...] = ()
    if declared is not None:
        missing = tuple(i for i in range(declared[1]) if i not in layers)
    return LayoutMatch(
        layout=layout,
        family=family,
        layer_indices=layers,
        names=tuple(names),
        declared=f"{declared[0]} = {declared[1]}" if declared else None,
        missing=missing,
        prefix=prefix + "{i}.",
    )


def _nextn(label: str, family: str, names: list[str], config: Mapping[str, Any]) -> LayoutMatch:
    declared = next(iter(_declared(config, (NEXTN_COUNT_KEY,))), None)
    if declared is None:
        raise ExtractError(no_heads_message(label, config))
    _check_declared_count(label, declared, None)
    count = declared[1]
    if count == 0:
        raise ExtractError(
            f"no MTP head tensors in {label}: its config.json sets {NEXTN_COUNT_KEY} = 0, so "
            "this model was released without MTP heads (Kimi K2 is one); there is nothing to "
            "extract — use a model whose original release has MTP heads"
        )
    trunk = trunk_layer_count(config)
    if trunk is None:
        raise ExtractError(
            f"{label}/config.json sets {NEXTN_COUNT_KEY}={count} but no num_hidden_layers, so "
            "the NextN layer indices are unknown; restore the original config.json"
        )
    expected = range(trunk, trunk + count)
    prefix = _trunk_prefix(names, expected)
    by_layer = {i: [n for n in names if n.startswith(f"{prefix}{i}.")] for i in expected}
    found = tuple(i for i, tensors in by_layer.items() if tensors)
    missing = tuple(i for i, tensors in by_layer.items() if not tensors)
    if not found:
        layers = ", ".join(f"{prefix}{i}.*" for i in expected)
        raise ExtractError(
            f"{label}: config.json declares {count} NextN layer(s) ({NEXTN_COUNT_KEY} = {count}, "
            f"num_hidden_layers = {trunk}) but the index has no tensor of {layers}; the index "
            "is incomplete — re-download it (and the shards) from the original release. A "
            "converter that drops these layers but keeps the config (mlx-lm does) leaves the "
            "same picture: point at the original release (e.g. deepseek-ai/…) instead"
        )
    return LayoutMatch(
        layout=LAYOUT_NEXTN,
        family=family,
        layer_indices=found,
        names=tuple(n for i in found for n in by_layer[i]),
        declared=f"{NEXTN_COUNT_KEY} = {count}",
        missing=missing,
        prefix=prefix + "{i}.",
    )


def _check_declared_count(label: str, declared: tuple[str, int], found: int | None) -> None:
    key, count = declared
    if count > MAX_DECLARED_LAYERS:
        held = f" (the checkpoint holds {found})" if found is not None else ""
        raise ExtractError(
            f"{label}/config.json declares {key} = {count} MTP layers{held}, more than the "
            f"{MAX_DECLARED_LAYERS} any release has; the config is damaged — restore the "
            "original config.json"
        )


def _trunk_prefix(names: list[str], expected: range) -> str:
    """The prefix whose layers hold the NextN layers (else the trunk's, else ``model.layers.``)."""
    for wanted in (expected.start, 0):
        for prefix in NEXTN_PREFIXES:
            if any(n.startswith(f"{prefix}{wanted}.") for n in names):
                return prefix
    return NEXTN_PREFIXES[0]
