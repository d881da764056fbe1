"""Extracting every synthetic layout: what a user checks in the sidecar, read with `safetensors`."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import pytest
import safetensors
from safetensors import safe_open

from app import TOOL_NAME, __version__
from app.engine.errors import ExtractError, JobCancelled
from app.engine.jobs import CancelToken, JobContext, JobEvent, ProgressEvent, StageEvent
from app.engine.mtp import LocalFolderSource, detect_mtp, extract_mtp
from tests.mtp.checkpoints import BUILDERS, SyntheticCheckpoint, build_deepseek_v3, from_bf16_bits
from tests.mtp.recording import RecordingSource
from tests.mtp.reference import reference_bf16


def _read_sidecar(path: Path) -> dict[str, dict]:
    return dict(safetensors.deserialize(path.read_bytes()))


def _extract(checkpoint: SyntheticCheckpoint, tmp_path: Path, **kwargs: object):
    out = tmp_path / "mtp.safetensors"
    result = extract_mtp(LocalFolderSource(checkpoint.folder), out, **kwargs)
    return out, result


@pytest.mark.parametrize("name", sorted(BUILDERS))
@pytest.mark.slow
def test_sidecar_holds_every_mtp_tensor_in_bf16_bit_exact(
    name: str, checkpoints: dict[str, SyntheticCheckpoint], tmp_path: Path
) -> None:
    checkpoint = checkpoints[name]
    out, result = _extract(checkpoint, tmp_path)

    sidecar = _read_sidecar(out)
    assert sorted(sidecar) == list(checkpoint.mtp_names)  # scale companions consumed
    for tensor_name, tensor in sidecar.items():
        assert tensor["dtype"] == "BF16"
        assert tuple(tensor["shape"]) == checkpoint.originals[tensor_name].shape
        expected = reference_bf16(checkpoint, tensor_name)
        got = np.frombuffer(tensor["data"], dtype="<u2")
        mismatches = np.flatnonzero(got != expected)
        assert mismatches.size == 0, (
            f"{tensor_name}: {mismatches.size} elements differ from the reference decoder, "
            f"first at {mismatches[0]}: {got[mismatches[0]]:#06x} != {expected[mismatches[0]]:#06x}"
        )
    assert result.layout == checkpoint.layout
    assert result.layer_indices == checkpoint.layer_indices
    assert result.tensor_count == len(checkpoint.mtp_names)


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_dequantised_values_match_the_original_weights(
    name: str, checkpoints: dict[str, SyntheticCheckpoint], tmp_path: Path
) -> None:
    """Within FP8/INT8 precision of the values the checkpoint was quantised from.

    This is what catches a DeepSeek ``_scale_inv`` that is divided instead of multiplied.
    """
    checkpoint = checkpoints[name]
    out, _ = _extract(checkpoint, tmp_path)
    sidecar = _read_sidecar(out)
    for tensor_name, original in checkpoint.originals.items():
        got = from_bf16_bits(np.frombuffer(sidecar[tensor_name]["data"], dtype="<u2"))
        want = original.ravel().astype(np.float64)
        stored = checkpoint.quantised.get(tensor_name)
        bf16_error = 2.0**-8 * np.abs(want)
        if stored is None:
            allowed = bf16_error
        else:
            per_element_scale = _per_element(stored.scales, original.shape, stored.quant)
            if stored.quant.code == "F8_E4M3":  # half an ulp: 2^-4 relative, 2^-10·s subnormal
                allowed = 2.0**-4 * np.abs(want) + 2.0**-10 * per_element_scale + bf16_error
            else:  # INT8: half a quantisation step
                allowed = 0.5 * per_element_scale + bf16_error
        error = np.abs(got - want)
        worst = int(np.argmax(error - allowed))
        assert np.all(error <= allowed), (
            f"{tensor_name}[{worst}] = {got[worst]} but the original is {want[worst]}"
        )


def _per_element(scales: np.ndarray, shape: tuple[int, ...], quant) -> np.ndarray:
    if quant.tile:
        rows, cols = shape
        grid = scales.reshape(math.ceil(rows / quant.tile), -1)
        full = np.repeat(np.repeat(grid, quant.tile, axis=0), quant.tile, axis=1)
        return full[:rows, :cols].ravel().astype(np.float64)
    return np.repeat(scales, quant.block).astype(np.float64)


def test_metadata_hash_and_byte_counts(
    checkpoints: dict[str, SyntheticCheckpoint], tmp_path: Path
) -> None:
    checkpoint = checkpoints["deepseek-v3-two-nextn-text-config"]
    out, result = _extract(
        checkpoint, tmp_path, extra_metadata={"source_repo": "deepseek-ai/DeepSeek-V3"}
    )
    with safe_open(str(out), framework="np") as sidecar:
        metadata = sidecar.metadata()
    assert metadata == {
        "format": "pt",
        "mtp_layout": "deepseek-nextn",
        "mtp_family": "deepseek_v3",
        "mtp_layer_indices": "3,4",
        "source": str(checkpoint.folder),
        "tool": TOOL_NAME,
        "tool_version": __version__,
        "source_repo": "deepseek-ai/DeepSeek-V3",
    }
    data = out.read_bytes()
    assert result.sha256 == hashlib.sha256(data).hexdigest()
    assert result.bytes_written == len(data)
    assert result.out_path == out
    assert result.bytes_needed == checkpoint.bytes_needed
    assert checkpoint.bytes_needed <= result.bytes_read <= 1.05 * checkpoint.bytes_needed
    header_length = int.from_bytes(data[:8], "little")
    assert header_length % 8 == 0
    assert data[8 + header_length - 1 : 8 + header_length] in (b" ", b"}")


def test_read_plan_scales_first_then_weights_in_shard_order(
    checkpoints: dict[str, SyntheticCheckpoint], tmp_path: Path
) -> None:
    checkpoint = checkpoints["deepseek-v3"]
    source = RecordingSource(checkpoint.folder)
    out = tmp_path / "mtp.safetensors"
    result = extract_mtp(source, out)

    streamed = [r for r in source.reads if r.kind == "iter_bytes"]
    assert [(r.path, r.start) for r in streamed] == sorted((r.path, r.start) for r in streamed)
    first_stream = source.reads.index(streamed[0])
    scale_reads = [
        r for r in source.reads[first_stream:] if r.kind == "read_bytes" and r.start >= 8
    ]
    assert scale_reads == [], "scales must all be read before the weights stream"
    # One streamed read per contiguous run: the MTP block spans two shards here.
    assert len(streamed) <= 2 * len(checkpoint.shard_files)
    shard_bytes = sum(r.length for r in source.reads if r.start > 8 and r.kind == "iter_bytes")
    assert shard_bytes <= result.bytes_read <= 1.05 * checkpoint.bytes_needed


def test_trunk_only_shards_are_never_opened(
    checkpoints: dict[str, SyntheticCheckpoint], tmp_path: Path
) -> None:
    checkpoint = checkpoints["deepseek-v3"]
    source = RecordingSource(checkpoint.folder)
    extract_mtp(source, tmp_path / "mtp.safetensors")
    mtp_shards = {checkpoint.shard_of[n] for n in (*checkpoint.mtp_names, *checkpoint.scale_names)}
    touched = {r.path for r in source.reads if r.path.endswith(".safetensors")}
    assert touched == mtp_shards
    assert len(mtp_shards) < len(checkpoint.shard_files)


def test_single_file_detection_reads_only_the_header(
    checkpoints: dict[str, SyntheticCheckpoint],
) -> None:
    checkpoint = checkpoints["deepseek-v3-single-file"]
    source = RecordingSource(checkpoint.folder)
    detection = detect_mtp(source)
    header_length = int.from_bytes(
        (checkpoint.folder / "model.safetensors").read_bytes()[:8], "little"
    )
    shard_reads = [r for r in source.reads if r.path == "model.safetensors"]
    assert [(r.start, r.length) for r in shard_reads] == [(0, 8), (8, header_length)]
    assert detection.layout == "deepseek-nextn"
    assert [t.name for t in detection.tensors] == list(checkpoint.mtp_names)


def test_job_events_and_cancellation_leave_no_file(
    checkpoints: dict[str, SyntheticCheckpoint], tmp_path: Path
) -> None:
    checkpoint = checkpoints["deepseek-v3"]
    events: list[JobEvent] = []
    _extract(checkpoint, tmp_path, ctx=JobContext(emit=events.append))
    stages = [e.stage for e in events if isinstance(e, StageEvent)]
    assert stages == ["detect", "extract"]
    progress = [e for e in events if isinstance(e, ProgressEvent)]
    assert progress and progress[-1].done == progress[-1].total > 0
    assert all(e.unit == "B" and e.stage == "extract" for e in progress)

    cancel = CancelToken()

    def cancel_on_first_progress(event: JobEvent) -> None:
        if isinstance(event, ProgressEvent):
            cancel.cancel()

    target = tmp_path / "cancelled"
    target.mkdir()
    with pytest.raises(JobCancelled):
        extract_mtp(
            LocalFolderSource(checkpoint.folder),
            target / "mtp.safetensors",
            JobContext(emit=cancel_on_first_progress, cancel=cancel),
        )
    assert list(target.iterdir()) == []


def test_a_failed_extraction_keeps_the_previous_good_file(tmp_path: Path) -> None:
    checkpoint = build_deepseek_v3(tmp_path / "ckpt")
    out = tmp_path / "out" / "mtp.safetensors"
    out.parent.mkdir()
    extract_mtp(LocalFolderSource(checkpoint.folder), out)
    good = out.read_bytes()

    class ShrinkingSource(LocalFolderSource):
        """A shard that loses its tail while being streamed (a download that was replaced)."""

        def iter_bytes(self, path: str, start: int, length: int, chunk_size: int):
            yield from super().iter_bytes(path, start, length // 2, chunk_size)

    with pytest.raises(ExtractError, match="truncated"):
        extract_mtp(ShrinkingSource(checkpoint.folder), out)
    assert out.read_bytes() == good
    assert [p.name for p in out.parent.iterdir()] == ["mtp.safetensors"]


def test_a_source_sending_extra_bytes_is_refused(tmp_path: Path) -> None:
    checkpoint = build_deepseek_v3(tmp_path / "ckpt")

    class Overflowing(LocalFolderSource):
        def iter_bytes(self, path: str, start: int, length: int, chunk_size: int):
            yield from super().iter_bytes(path, start, length, chunk_size)
            yield b"\0" * 16

    out_dir = tmp_path / "out"
    out_dir.mkdir()
    with pytest.raises(ExtractError, match="16 bytes more than asked"):
        extract_mtp(Overflowing(checkpoint.folder), out_dir / "mtp.safetensors")
    assert list(out_dir.iterdir()) == []


def test_every_streamed_read_is_finished_not_left_open(
    checkpoints: dict[str, SyntheticCheckpoint], tmp_path: Path
) -> None:
    """A Hub source holds an HTTP response per streamed read; it must be released promptly."""
    checkpoint = checkpoints["deepseek-v3"]
    opened: list[str] = []
    finished: list[str] = []

    class Tracking(LocalFolderSource):
        def iter_bytes(self, path: str, start: int, length: int, chunk_size: int):
            opened.append(path)
            try:
                yield from super().iter_bytes(path, start, length, chunk_size)
            finally:
                finished.append(path)

    extract_mtp(Tracking(checkpoint.folder), tmp_path / "mtp.safetensors")
    assert opened and finished == opened
