"""The extraction job: detect the MTP heads, fetch only their bytes, write a BF16 sidecar.

Read plan: every scale tensor first (they are small and needed before their weights can be
decoded), then the weights streamed in (shard, offset) order, adjacent spans merged into one
streamed read per run (one ranged GET on a Hub source). The sidecar's data is laid out in that
same read order — safetensors readers accept any data order because the header carries the
offsets — so each weight is decoded and written the moment its bytes arrive.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from app import TOOL_NAME, __version__
from app.engine.errors import ExtractError
from app.engine.jobs import JobContext, ProgressReporter
from app.engine.mtp.bytestream import ByteStream
from app.engine.mtp.dequant import Scales, decode_tensor
from app.engine.mtp.detect import MtpDetection, MtpTensor, detect_mtp
from app.engine.mtp.readplan import ReadRun, plan_runs
from app.engine.mtp.source import CheckpointSource
from app.engine.mtp.writer import EXTRACT_PARTIAL, OutputTensor, SafetensorsStreamWriter
from app.engine.partial_files import sweep_partials
from app.engine.units import format_bytes

READ_SLACK = 0.04
"""Bytes read may exceed bytes needed by this fraction (gaps bridged to save requests)."""
CHUNK_SIZE = 8 << 20
RESERVED_METADATA = (
    "format",
    "mtp_layout",
    "mtp_family",
    "mtp_layer_indices",
    "mtp_missing_layers",
    "source",
    "tool",
    "tool_version",
)


@dataclass(frozen=True)
class ExtractResult:
    out_path: Path
    layout: str
    family: str
    layer_indices: tuple[int, ...]
    missing_layers: tuple[int, ...]
    """Layers the config declares that were absent (a partial extraction); empty otherwise."""
    tensor_count: int
    bytes_needed: int
    """Stored bytes of the MTP tensors and their scales."""
    bytes_read: int
    """Tensor bytes actually fetched (bridged gaps included; headers and JSON files excluded)."""
    bytes_written: int
    sha256: str
    seconds: float

    def to_json(self) -> dict[str, Any]:
        summary = asdict(self)
        summary["out_path"] = str(self.out_path)
        summary["layer_indices"] = list(self.layer_indices)
        summary["missing_layers"] = list(self.missing_layers)
        return summary


def sidecar_metadata(
    detection: MtpDetection, extra_metadata: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The sidecar's ``__metadata__``: format, layout and family, provenance and tool version,
    the layers a partial extraction lacks (only then), plus ``extra``."""
    metadata = {
        "format": "pt",
        "mtp_layout": detection.layout,
        "mtp_family": detection.family,
        "mtp_layer_indices": ",".join(str(i) for i in detection.layer_indices),
        "source": detection.source_label,
        "tool": TOOL_NAME,
        "tool_version": __version__,
    }
    if detection.missing_layers:
        metadata["mtp_missing_layers"] = ",".join(str(i) for i in detection.missing_layers)
    for key, value in (extra_metadata or {}).items():
        if key in RESERVED_METADATA or not isinstance(value, str):
            raise ValueError(f"extra metadata {key!r}={value!r} is reserved or not a string")
        metadata[key] = value
    return metadata


def extract_mtp(
    source: CheckpointSource,
    out_path: str | Path,
    ctx: JobContext | None = None,
    extra_metadata: Mapping[str, str] | None = None,
    allow_partial: bool = False,
) -> ExtractResult:
    """Write the MTP heads of ``source`` to ``out_path`` as a BF16 safetensors sidecar.

    Emits ``detect`` and ``extract`` stages and byte progress (bytes read) through ``ctx``, and
    stops at the next chunk when ``ctx`` is cancelled. ``out_path`` appears only when complete.
    ``allow_partial``: extract the layers present when some that the config declares are absent
    (logged, and recorded in the sidecar's metadata) instead of failing.
    """
    started = time.perf_counter()
    ctx = ctx or JobContext()
    out = _checked_output_path(Path(out_path))
    ctx.stage("detect", source.label)
    detection = detect_mtp(source, allow_partial=allow_partial)
    metadata = sidecar_metadata(detection, extra_metadata)
    ctx.log(
        f"found {len(detection.tensors)} MTP tensors ({detection.layout}, {detection.family}, "
        f"layers {list(detection.layer_indices)}) in {len(detection.shards)} shard(s); "
        f"{format_bytes(detection.bytes_needed)} to read"
    )
    if detection.missing_layers:
        ctx.log(
            f"partial extraction: layer(s) {list(detection.missing_layers)} declared by the "
            "config are absent from the checkpoint and are not in the sidecar"
        )

    budget = int(READ_SLACK * detection.bytes_needed)
    scale_runs = plan_runs((t.scale for t in detection.tensors if t.scale), budget)
    budget -= sum(run.wasted for run in scale_runs)
    weight_runs = plan_runs((t.tensor for t in detection.tensors), budget)
    ctx.stage("extract", str(out))
    for leftover in sweep_partials(out.parent, EXTRACT_PARTIAL):
        ctx.log(leftover.describe())
    progress = ctx.progress_reporter(
        "extract", sum(run.length for run in (*scale_runs, *weight_runs))
    )
    owners = {t.scale.name: t for t in detection.tensors if t.scale}
    scales = _read_scales(source, scale_runs, owners, progress)

    by_name = {t.name: t for t in detection.tensors}
    empty = [t for t in detection.tensors if t.tensor.nbytes == 0]
    order = empty + [by_name[s.name] for run in weight_runs for s in run.tensors]
    outputs = [OutputTensor(t.name, "BF16", t.tensor.shape) for t in order]
    with SafetensorsStreamWriter(out, outputs, metadata) as writer:
        for run in weight_runs:
            stream_run(source, run, by_name, scales, writer, progress)
        written = writer.commit()
    return ExtractResult(
        out_path=out,
        layout=detection.layout,
        family=detection.family,
        layer_indices=detection.layer_indices,
        missing_layers=detection.missing_layers,
        tensor_count=len(order),
        bytes_needed=detection.bytes_needed,
        bytes_read=progress.done,
        bytes_written=written.size,
        sha256=written.sha256,
        seconds=time.perf_counter() - started,
    )


def _checked_output_path(out: Path) -> Path:
    out = out.expanduser().absolute()
    if out.is_dir():
        raise ExtractError(
            f"output {out} is a folder; give a file name such as {out}/mtp.safetensors"
        )
    if not out.parent.is_dir():
        raise ExtractError(f"output folder {out.parent} does not exist; create it first")
    return out


def _read_scales(
    source: CheckpointSource,
    runs: Sequence[ReadRun],
    owners: Mapping[str, MtpTensor],
    progress: ProgressReporter,
) -> dict[str, Scales]:
    """Every scale tensor, checked, keyed by the name of the weight it scales."""
    scales: dict[str, Scales] = {}
    for run in runs:
        data = source.read_bytes(run.shard, run.start, run.length)
        progress.advance(len(data))
        for tensor in run.tensors:
            owner = owners[tensor.name]
            raw = data[tensor.start - run.start : tensor.end - run.start]
            scales[owner.name] = Scales.parse(owner, raw, source.label)
    return scales


def stream_run(
    source: CheckpointSource,
    run: ReadRun,
    by_name: Mapping[str, MtpTensor],
    scales: Mapping[str, Scales],
    writer: SafetensorsStreamWriter,
    progress: ProgressReporter,
) -> None:
    """Decode ``run``'s tensors (dequantised to BF16 where they have scales) into ``writer``,
    reading only the run's bytes; the extractor and the FP8 converter share it."""
    stream = ByteStream(
        source.iter_bytes(run.shard, run.start, run.length, CHUNK_SIZE),
        where=f"{source.label}/{run.shard}",
        on_chunk=progress.advance,
    )
    position = run.start
    try:
        for stored in run.tensors:
            stream.skip(stored.start - position)
            item = by_name[stored.name]
            for piece in decode_tensor(item, scales.get(item.name), stream.take):
                writer.write(piece)
            position = stored.end
        stream.finish()
    finally:
        stream.close()
