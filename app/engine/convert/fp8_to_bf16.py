"""An FP8 checkpoint folder → the same checkpoint in BF16, dequantised exactly, shard by shard.

Every tensor goes through the sidecar extractor's dequantiser (:mod:`app.engine.mtp.dequant`):
FP8/INT8 codes times their block scales computed in F32 and rounded once to BF16, with DeepSeek's
rule that a ``_scale_inv`` value is *multiplied* (docs/formats.md#dequantisation); BF16/F16/F32
tensors pass through (converted to BF16). Scale companions are consumed, not copied. Each source
shard becomes one BF16 shard of the same name, streamed (memory stays near one piece of one tensor);
the index is rewritten without the scales, ``config.json`` is copied without its
``quantization_config``, and every other file (tokenizer, templates) is copied as is. MTP tensors
are kept, so the MLX backend finds the model's own head.

The copy is written into a hidden folder beside the destination and renamed into place only
when complete; a failure or a cancel removes it, and an existing destination is never touched.
"""

from __future__ import annotations

import json
import secrets
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app import TOOL_NAME, __version__
from app.engine.errors import ConvertError
from app.engine.jobs import JobContext, ProgressReporter
from app.engine.mtp.checkpoint import CONFIG_FILE, INDEX_FILE, read_checkpoint_index
from app.engine.mtp.dequant import Scales
from app.engine.mtp.detect import MtpTensor, pair_scales, refuse_packed_int8
from app.engine.mtp.extract import stream_run
from app.engine.mtp.header import ShardHeader, StoredTensor, read_shard_header
from app.engine.mtp.readplan import ReadRun, plan_runs
from app.engine.mtp.source import LocalFolderSource
from app.engine.mtp.writer import OutputTensor, SafetensorsStreamWriter

STAGE = "dequantise"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".msgpack", ".h5")
"""Weights in other formats are not copied: the BF16 shards replace them."""


@dataclass(frozen=True)
class Bf16Checkpoint:
    """What :func:`fp8_to_bf16` wrote."""

    folder: Path
    tensors: int
    dequantised: int
    """Tensors that had a scale (the FP8 ones)."""
    bytes_written: int
    seconds: float


def fp8_to_bf16(source_dir: Path, out_dir: Path, ctx: JobContext | None = None) -> Bf16Checkpoint:
    """Write ``source_dir`` (an FP8 checkpoint) as a BF16 checkpoint folder ``out_dir``.

    Emits a ``dequantise`` stage with byte progress (source bytes read) and stops at the next
    piece when ``ctx`` is cancelled.
    """
    started = time.perf_counter()
    ctx = ctx or JobContext()
    out = _checked_destination(Path(out_dir))
    source = LocalFolderSource(source_dir)
    ctx.stage(STAGE, source.label)
    index = read_checkpoint_index(source)
    headers = _read_headers(source, index.weight_map, index.headers)
    stored = {name: headers[shard].tensors[name] for name, shard in index.weight_map.items()}
    tensors = pair_scales(source.label, stored)
    refuse_packed_int8(source.label, tensors, index.config)
    dequantised = sum(item.scale is not None for item in tensors)
    if not dequantised:
        raise ConvertError(
            f"{source.label} has no quantised tensors (no FP8 or INT8 weight with a scale); it "
            "is already a BF16/F16 checkpoint — load it as it is"
        )
    ctx.log(
        f"{len(tensors)} tensors in {len(headers)} shard(s), {dequantised} of them FP8/INT8 "
        "with block scales; writing BF16"
    )
    by_shard: dict[str, list[MtpTensor]] = {}
    for item in tensors:
        by_shard.setdefault(item.tensor.shard, []).append(item)
    plans = [ShardPlan.of(shard, items) for shard, items in sorted(by_shard.items())]
    progress = ctx.progress_reporter(STAGE, sum(plan.bytes_to_read for plan in plans))
    temp = out.with_name(f".{out.name}.partial-{secrets.token_hex(4)}")
    temp.mkdir()
    try:
        written = sum(_convert_shard(source, plan, temp / plan.shard, progress) for plan in plans)
        _write_index(temp, tensors, index.weight_map, written)
        _write_config(source.folder / CONFIG_FILE, temp / CONFIG_FILE)
        _copy_other_files(source, set(headers), temp)
        temp.rename(out)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return Bf16Checkpoint(out, len(tensors), dequantised, written, time.perf_counter() - started)


def _checked_destination(out: Path) -> Path:
    out = out.expanduser().absolute()
    if out.exists():
        raise ConvertError(
            f"{out} already exists; choose another output folder or remove it first (nothing "
            "was written)"
        )
    if not out.parent.is_dir():
        raise ConvertError(f"output folder {out.parent} does not exist; create it first")
    return out


def _read_headers(
    source: LocalFolderSource, weight_map: Mapping[str, str], known: Mapping[str, ShardHeader]
) -> dict[str, ShardHeader]:
    headers = dict(known)
    for shard in sorted(set(weight_map.values()) - set(headers)):
        headers[shard] = read_shard_header(source, shard)
    for name, shard in weight_map.items():
        if name not in headers[shard].tensors:
            raise ConvertError(
                f"{source.label}/{INDEX_FILE} places tensor {name} in {shard}, but that shard's "
                "header has no such tensor; the index and shards are from different revisions — "
                "re-download them"
            )
    return headers


@dataclass(frozen=True)
class ShardPlan:
    """One output shard: its tensors (weights stored in ``shard``, with their scales) and the
    runs its weights are streamed in (the small gaps bridged are the scales, read apart)."""

    shard: str
    items: tuple[MtpTensor, ...]
    runs: tuple[ReadRun, ...]

    @classmethod
    def of(cls, shard: str, items: Sequence[MtpTensor]) -> ShardPlan:
        budget = sum(item.scale.nbytes for item in items if item.scale is not None)
        return cls(shard, tuple(items), plan_runs((item.tensor for item in items), budget))

    @property
    def bytes_to_read(self) -> int:
        scales = sum(item.scale.nbytes for item in self.items if item.scale is not None)
        return scales + sum(run.length for run in self.runs)


def _convert_shard(
    source: LocalFolderSource, plan: ShardPlan, out: Path, progress: ProgressReporter
) -> int:
    """Write one BF16 shard for the tensors of ``plan``; returns its size."""
    items, runs = plan.items, plan.runs
    scales = {
        item.name: Scales.parse(item, _read(source, item.scale, progress), source.label)
        for item in items
        if item.scale is not None
    }
    by_name = {item.name: item for item in items}
    empty = [item for item in items if item.tensor.nbytes == 0]
    order = empty + [by_name[tensor.name] for run in runs for tensor in run.tensors]
    outputs = [OutputTensor(item.name, "BF16", item.tensor.shape) for item in order]
    metadata = {
        "format": "pt",
        "converted_from": "fp8",
        "tool": TOOL_NAME,
        "tool_version": __version__,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    with SafetensorsStreamWriter(out, outputs, metadata) as writer:
        for run in runs:
            stream_run(source, run, by_name, scales, writer, progress)
        return writer.commit().size


def _read(
    source: LocalFolderSource, tensor: StoredTensor | None, progress: ProgressReporter
) -> bytes:
    assert tensor is not None
    data = source.read_bytes(tensor.shard, tensor.start, tensor.nbytes)
    progress.advance(len(data))
    return data


def _write_index(
    folder: Path, tensors: Sequence[MtpTensor], weight_map: Mapping[str, str], size: int
) -> None:
    shards = {item.tensor.shard for item in tensors}
    if shards == {"model.safetensors"}:
        return
    index = {
        "metadata": {"total_size": size},
        "weight_map": {item.name: weight_map[item.name] for item in tensors},
    }
    (folder / INDEX_FILE).write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")


def _write_config(source: Path, out: Path) -> None:
    """``config.json`` without ``quantization_config`` (top level and ``text_config``), BF16."""
    try:
        config: Any = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConvertError(f"{source} cannot be read as JSON ({exc}); re-download it") from None
    if not isinstance(config, dict):
        raise ConvertError(f"{source} is not a JSON object; re-download it")
    for scope in (config, config.get("text_config")):
        if isinstance(scope, dict):
            scope.pop("quantization_config", None)
            for key in ("dtype", "torch_dtype"):
                if key in scope:
                    scope[key] = "bfloat16"
    out.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def _copy_other_files(source: LocalFolderSource, shards: set[str], folder: Path) -> None:
    """Tokenizer, templates, generation config, card: everything but weights, index, config
    (read through the source, which refuses a file that leads out of the folder)."""
    skipped = shards | {INDEX_FILE, CONFIG_FILE}
    for relative in source.file_sizes():
        if relative in skipped or relative.endswith(WEIGHT_SUFFIXES):
            continue
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes(relative))
