"""Finding a checkpoint's tensor list: its index (or single file's header) and its config.

Detection needs to know which tensor lives in which shard and what ``config.json`` says about
NextN layers. This module reads exactly that — the small JSON files and, for a single-file
checkpoint, the safetensors header — and nothing else, so it costs a few small range reads even
on a remote source. Shard names in the index are checked like any name from a file (no ``..``,
not absolute, …) before anything is read through them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.engine.bounded_json import MAX_JSON_BYTES, parse_bounded_json
from app.engine.errors import ExtractError
from app.engine.mtp.header import ShardHeader, read_shard_header
from app.engine.mtp.source import CheckpointSource
from app.engine.safepath import relative_path_problem

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
CONFIG_FILE = "config.json"


@dataclass(frozen=True)
class CheckpointIndex:
    """Tensor name → shard for the whole checkpoint, plus its config (empty when absent)."""

    weight_map: Mapping[str, str]
    config: Mapping[str, Any]
    headers: Mapping[str, ShardHeader]
    """Shard headers already read while indexing (the single file's), reused by detection."""


def read_checkpoint_index(source: CheckpointSource) -> CheckpointIndex:
    files = source.file_sizes()
    config = _read_json_object(source, CONFIG_FILE) if CONFIG_FILE in files else {}
    if INDEX_FILE in files:
        return CheckpointIndex(_read_weight_map(source), config, {})
    if SINGLE_FILE in files:
        header = read_shard_header(source, SINGLE_FILE)
        weight_map = dict.fromkeys(header.tensors, SINGLE_FILE)
        return CheckpointIndex(weight_map, config, {SINGLE_FILE: header})
    raise ExtractError(
        f"{source.label} is not a safetensors checkpoint: it has neither {INDEX_FILE} nor "
        f"{SINGLE_FILE}; point the source at the folder (or repo) of the original release that "
        "holds config.json and the *.safetensors shards"
    )


def _read_weight_map(source: CheckpointSource) -> dict[str, str]:
    index = _read_json_object(source, INDEX_FILE)
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not all(
        isinstance(name, str) and isinstance(shard, str) for name, shard in weight_map.items()
    ):
        raise ExtractError(
            f'{source.label}/{INDEX_FILE} has no valid "weight_map" (an object of tensor name '
            "→ shard file); re-download the index"
        )
    for name, shard in weight_map.items():
        if (problem := relative_path_problem(shard)) is not None:
            raise ExtractError(
                f"{source.label}/{INDEX_FILE} places tensor {name} in shard {shard!r}, which is "
                f"refused: {problem}; a shard must be a file inside the checkpoint — restore the "
                "original index"
            )
    return weight_map


def _read_json_object(source: CheckpointSource, path: str) -> dict[str, Any]:
    size = source.file_sizes().get(path, 0)
    if size > MAX_JSON_BYTES:
        raise ExtractError(
            f"{source.label}/{path} is {size} bytes, more than the {MAX_JSON_BYTES} a real "
            "config or index takes; re-download this file from the original release"
        )
    try:
        value = parse_bounded_json(source.read_bytes(path))
    except ValueError as exc:
        raise ExtractError(f"{source.label}/{path} {exc}; re-download this file") from None
    if not isinstance(value, dict):
        raise ExtractError(f"{source.label}/{path} is not a JSON object; re-download this file")
    return value
