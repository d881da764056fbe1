"""What a graft writes: the converter's head, the sidecar's values, the base's bytes untouched."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader, quants

from app.engine.graft import check_graft, graft_mtp, plan_graft
from app.engine.graft.writer import PADDING_KEY
from app.engine.jobs import JobContext, ProgressEvent
from tests.graft.bases import DEMO_GGUF

HEAD = "blk.8."
SIDECAR_TO_GGUF = {
    "mtp.fc.weight": "blk.8.nextn.eh_proj.weight",
    "mtp.pre_fc_norm_embedding.weight": "blk.8.nextn.enorm.weight",
    "mtp.pre_fc_norm_hidden.weight": "blk.8.nextn.hnorm.weight",
    "mtp.norm.weight": "blk.8.nextn.shared_head_norm.weight",
    "mtp.layers.0.input_layernorm.weight": "blk.8.attn_norm.weight",
    "mtp.layers.0.post_attention_layernorm.weight": "blk.8.post_attention_norm.weight",
    "mtp.layers.0.self_attn.q_norm.weight": "blk.8.attn_q_norm.weight",
    "mtp.layers.0.self_attn.k_norm.weight": "blk.8.attn_k_norm.weight",
    "mtp.layers.0.self_attn.q_proj.weight": "blk.8.attn_q.weight",
    "mtp.layers.0.self_attn.k_proj.weight": "blk.8.attn_k.weight",
    "mtp.layers.0.self_attn.v_proj.weight": "blk.8.attn_v.weight",
    "mtp.layers.0.self_attn.o_proj.weight": "blk.8.attn_output.weight",
    "mtp.layers.0.mlp.gate_proj.weight": "blk.8.ffn_gate.weight",
    "mtp.layers.0.mlp.up_proj.weight": "blk.8.ffn_up.weight",
    "mtp.layers.0.mlp.down_proj.weight": "blk.8.ffn_down.weight",
}


def _tensors(path: Path) -> dict[str, tuple[GGMLQuantizationType, np.ndarray]]:
    return {t.name: (t.tensor_type, np.asarray(t.data)) for t in GGUFReader(path).tensors}


def _fields(path: Path) -> dict[str, object]:
    reader = GGUFReader(path)
    return {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}


def _bf16_sidecar(path: Path) -> dict[str, np.ndarray]:
    """The sidecar's tensors as float32 (safetensors' numpy loader has no bfloat16)."""
    import json
    import struct

    raw = path.read_bytes()
    length = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + length])
    header.pop("__metadata__", None)
    out = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        words = np.frombuffer(raw[8 + length + begin : 8 + length + end], dtype="<u2")
        out[name] = (words.astype(np.uint32) << 16).view(np.float32).reshape(entry["shape"])
    return out


@pytest.mark.slow
def test_grafting_the_bf16_checkpoints_sidecar_rebuilds_the_converters_gguf(
    graft_files: dict[str, Path], tmp_path: Path
) -> None:
    """demo-mtp.gguf was made by llama.cpp's converter from demo-mtp-hf with its mtp.* tensors;
    the trunk of that file plus the sidecar extracted from the same checkpoint must give back
    every tensor byte for byte and the same metadata."""
    out = tmp_path / "rebuilt.gguf"
    result = graft_mtp(graft_files["trunk_q8"], graft_files["sidecar_hf"], out)
    assert result.norm_style == "offset"
    assert (result.trunk_blocks, result.head_blocks, result.head_tensors) == (8, 1, 15)
    converted, rebuilt = _tensors(DEMO_GGUF), _tensors(out)
    assert sorted(rebuilt) == sorted(converted)
    for name, (kind, data) in converted.items():
        assert rebuilt[name][0] == kind, name
        assert np.array_equal(rebuilt[name][1], data), name
    fields = _fields(out)
    padding = fields.pop(PADDING_KEY)  # spaces that keep the copied data page-aligned
    assert set(padding) <= {" "}
    assert fields == _fields(DEMO_GGUF)
    assert result.bytes_written == out.stat().st_size
    base_start = GGUFReader(graft_files["trunk_q8"]).data_offset
    assert GGUFReader(out).data_offset % 4096 == base_start % 4096


@pytest.mark.slow
def test_the_base_tensors_are_copied_as_bytes_and_the_metadata_grows_by_one_block(
    graft_files: dict[str, Path],
) -> None:
    base, grafted = _tensors(graft_files["trunk_q4"]), _tensors(graft_files["grafted_q4"])
    assert {n for n in grafted if not n.startswith(HEAD)} == set(base)
    for name, (kind, data) in base.items():
        assert grafted[name][0] == kind and np.array_equal(grafted[name][1], data), name
    before, after = _fields(graft_files["trunk_q4"]), _fields(graft_files["grafted_q4"])
    assert after["qwen35.block_count"] == before["qwen35.block_count"] + 1 == 9
    assert "qwen35.nextn_predict_layers" not in before
    assert after["qwen35.nextn_predict_layers"] == 1
    assert after["qwen35.attention.recurrent_layers"] == [
        *before["qwen35.attention.recurrent_layers"],
        False,
    ]
    changed = {
        "qwen35.block_count",
        "qwen35.nextn_predict_layers",
        "qwen35.attention.recurrent_layers",
        PADDING_KEY,
    }
    assert {k: v for k, v in after.items() if k not in changed} == {
        k: v for k, v in before.items() if k not in changed
    }


@pytest.mark.parametrize("head_type", ["q8_0", "f16", "bf16"])
@pytest.mark.slow
def test_the_grafted_head_equals_the_sidecar_within_quantisation_error(
    graft_files: dict[str, Path], tmp_path: Path, head_type: str
) -> None:
    out = tmp_path / f"grafted-{head_type}.gguf"
    graft_mtp(graft_files["trunk_q4"], graft_files["sidecar_fp8"], out, head_type=head_type)
    sidecar = _bf16_sidecar(graft_files["sidecar_fp8"])
    grafted = {t.name: t for t in GGUFReader(out).tensors}
    matrix_type = {
        "q8_0": GGMLQuantizationType.Q8_0,
        "f16": GGMLQuantizationType.F16,
        "bf16": GGMLQuantizationType.BF16,
    }[head_type]
    for source, target in SIDECAR_TO_GGUF.items():
        tensor = grafted[target]
        expected = sidecar[source]
        values = quants.dequantize(np.asarray(tensor.data), tensor.tensor_type).reshape(
            expected.shape
        )
        if expected.ndim == 1:
            assert tensor.tensor_type == GGMLQuantizationType.F32, target
            assert np.array_equal(values, expected + np.float32(1.0)), target  # offset norm + 1
            continue
        assert tensor.tensor_type == matrix_type, target
        error = np.abs(values - expected).max()
        if head_type == "bf16":
            assert error == 0.0, target  # a BF16 sidecar stored as BF16 is exact
        elif head_type == "f16":
            assert error <= np.abs(expected).max() * 2**-10, target
        else:
            # Q8_0: a block of 32 is stored as round(x / d) · d with d = amax / 127 kept in F16,
            # so each value is at most half a step off, plus the scale's F16 rounding (2^-11).
            blocks, values_in_blocks = expected.reshape(-1, 32), values.reshape(-1, 32)
            amax = np.abs(blocks).max(axis=1, keepdims=True)
            bound = amax / 127 * 0.5 + amax * 2**-11 + 1e-7
            assert (np.abs(values_in_blocks - blocks) <= bound).all(), target
            assert error > 0.0, target


def test_plan_and_check_write_nothing_and_describe_the_graft(graft_files: dict[str, Path]) -> None:
    folder = graft_files["trunk_q8"].parent
    before = sorted(folder.iterdir())
    plan = plan_graft(graft_files["trunk_q8"], graft_files["sidecar_fp8"])
    assert (plan.architecture, plan.trunk_blocks, plan.head_blocks) == ("qwen35", 8, 1)
    assert plan.norm_style == "offset" and plan.replaced_blocks == 0
    assert plan.estimated_bytes >= graft_files["grafted_q8"].stat().st_size
    assert check_graft(graft_files["trunk_q8"], graft_files["sidecar_fp8"]).ok
    refused = check_graft(DEMO_GGUF, graft_files["sidecar_fp8"])
    assert not refused.ok and refused.plan is None
    assert "already has 1 MTP block" in (refused.problem or "")
    assert check_graft(DEMO_GGUF, graft_files["sidecar_fp8"], replace=True).ok
    assert sorted(folder.iterdir()) == before


def test_replace_swaps_the_head_of_a_gguf_that_has_one(
    graft_files: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "replaced.gguf"
    result = graft_mtp(DEMO_GGUF, graft_files["sidecar_fp8"], out, replace=True)
    assert (result.trunk_blocks, result.head_blocks, result.replaced_blocks) == (8, 1, 1)
    replaced, fresh = _tensors(out), _tensors(graft_files["grafted_q8"])
    assert sorted(replaced) == sorted(fresh)
    for name, (kind, data) in fresh.items():
        assert replaced[name][0] == kind and np.array_equal(replaced[name][1], data), name
    assert _fields(out)["qwen35.block_count"] == 9
    demo_head = _tensors(DEMO_GGUF)["blk.8.nextn.eh_proj.weight"][1]
    assert not np.array_equal(replaced["blk.8.nextn.eh_proj.weight"][1], demo_head)


def test_progress_counts_every_byte_written(graft_files: dict[str, Path], tmp_path: Path) -> None:
    events: list[ProgressEvent] = []
    out = tmp_path / "progress.gguf"
    graft_mtp(
        graft_files["trunk_q8"],
        graft_files["sidecar_fp8"],
        out,
        ctx=JobContext(emit=lambda e: events.append(e) if isinstance(e, ProgressEvent) else None),
    )
    assert events and events[-1].done == events[-1].total == out.stat().st_size
    assert [e.done for e in events] == sorted(e.done for e in events)
