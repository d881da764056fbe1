"""Every bad input of issue 2: a clear error naming the file/tensor, and no output file left."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from app.engine.errors import ExtractError
from app.engine.mtp import LocalFolderSource, extract_mtp, no_heads_message
from tests.mtp.checkpoints import (
    INDEX_FILE,
    Spec,
    SyntheticCheckpoint,
    build_deepseek_v3,
    build_mixed_formats,
    rewrite_header,
    write_checkpoint,
)

EH_PROJ = "model.layers.3.eh_proj.weight"
EXPERT_0 = "model.layers.3.mlp.experts.0.gate_proj.weight"
EXPERT_1 = "model.layers.3.mlp.experts.1.gate_proj.weight"


def _fails_cleanly(folder: Path, tmp_path: Path, match: str) -> ExtractError:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    with pytest.raises(ExtractError, match=match) as caught:
        extract_mtp(LocalFolderSource(folder), out_dir / "mtp.safetensors")
    assert list(out_dir.iterdir()) == [], "a failed extraction must leave nothing behind"
    return caught.value


def _shard(checkpoint: SyntheticCheckpoint, tensor: str) -> Path:
    return checkpoint.folder / checkpoint.shard_of[tensor]


def _edit_entry(tensor: str, **changes: object) -> Callable[[dict], None]:
    def edit(header: dict) -> None:
        header[tensor].update(changes)

    return edit


def _edit_index(checkpoint: SyntheticCheckpoint, edit: Callable[[dict], None]) -> None:
    path = checkpoint.folder / INDEX_FILE
    index = json.loads(path.read_text())
    edit(index["weight_map"])
    path.write_text(json.dumps(index))


def test_truncated_shard(tmp_path: Path) -> None:
    checkpoint = build_deepseek_v3(tmp_path / "ckpt")
    shard = _shard(checkpoint, EH_PROJ)
    with shard.open("r+b") as handle:
        handle.truncate(shard.stat().st_size - 100)
    _fails_cleanly(checkpoint.folder, tmp_path, f"{shard.name}.*truncated.*re-download")


def test_header_length_beyond_the_file(tmp_path: Path) -> None:
    checkpoint = build_deepseek_v3(tmp_path / "ckpt")
    shard = _shard(checkpoint, EH_PROJ)
    with shard.open("r+b") as handle:
        handle.write((shard.stat().st_size + 1).to_bytes(8, "little"))
    _fails_cleanly(checkpoint.folder, tmp_path, f"{shard.name}: header length .* beyond the end")


def test_tensor_offsets_out_of_range(tmp_path: Path) -> None:
    checkpoint = build_deepseek_v3(tmp_path / "ckpt")
    shard = _shard(checkpoint, EH_PROJ)
    size = len(checkpoint.stored[EH_PROJ])
    far = 10**9
    rewrite_header(shard, _edit_entry(EH_PROJ, data_offsets=[far, far + size]))
    _fails_cleanly(checkpoint.folder, tmp_path, f"{shard.name}: tensor {EH_PROJ} .*out of range")


def test_overlapping_tensors(tmp_path: Path) -> None:
    checkpoint = build_deepseek_v3(tmp_path / "ckpt")
    assert checkpoint.shard_of[EXPERT_0] == checkpoint.shard_of[EXPERT_1]
    shard = _shard(checkpoint, EXPERT_0)

    def alias(header: dict) -> None:
        header[EXPERT_1]["data_offsets"] = header[EXPERT_0]["data_offsets"]

    rewrite_header(shard, alias)
    _fails_cleanly(checkpoint.folder, tmp_path, "experts.[01].gate_proj.weight and .* overlap")


def test_unknown_dtype(tmp_path: Path) -> None:
    checkpoint = build_deepseek_v3(tmp_path / "ckpt")
    rewrite_header(_shard(checkpoint, EH_PROJ), _edit_entry(EH_PROJ, dtype="F8_E9M9"))
    _fails_cleanly(checkpoint.folder, tmp_path, f"tensor {EH_PROJ} has unknown dtype 'F8_E9M9'")


def test_dtype_the_extractor_cannot_convert(tmp_path: Path) -> None:
    checkpoint = build_deepseek_v3(tmp_path / "ckpt")
    rewrite_header(_shard(checkpoint, EH_PROJ), _edit_entry(EH_PROJ, dtype="F8_E5M2"))
    _fails_cleanly(checkpoint.folder, tmp_path, f"{EH_PROJ} has dtype F8_E5M2, which cannot be")


def test_scale_count_matching_no_layout(tmp_path: Path) -> None:
    checkpoint = build_deepseek_v3(tmp_path / "ckpt")
    scale = EH_PROJ + "_scale_inv"

    def seven_scales(header: dict) -> None:
        start = header[scale]["data_offsets"][0]
        header[scale].update(shape=[7], data_offsets=[start, start + 28])

    rewrite_header(_shard(checkpoint, scale), seven_scales)
    _fails_cleanly(
        checkpoint.folder, tmp_path, rf"{EH_PROJ} \[200, 400\] .* has 7 scales .* no block layout"
    )


def test_e8m0_nan_scale(tmp_path: Path) -> None:
    checkpoint = build_mixed_formats(tmp_path / "ckpt")
    scale = "mtp.0.proj.scale"
    shard = _shard(checkpoint, scale)
    raw = bytearray(shard.read_bytes())
    length = int.from_bytes(raw[:8], "little")
    begin = json.loads(raw[8 : 8 + length])[scale]["data_offsets"][0]
    raw[8 + length + begin + 1] = 0xFF
    shard.write_bytes(bytes(raw))
    _fails_cleanly(
        checkpoint.folder, tmp_path, rf"scale tensor {scale} .* holds 0xFF \(NaN\) at index 1"
    )


def test_missing_scale_tensor(tmp_path: Path) -> None:
    checkpoint = build_deepseek_v3(tmp_path / "ckpt")
    _edit_index(checkpoint, lambda weight_map: weight_map.pop(EH_PROJ + "_scale_inv"))
    _fails_cleanly(
        checkpoint.folder, tmp_path, f"{EH_PROJ} is F8_E4M3 but its scale tensor .* missing"
    )


def test_index_naming_a_missing_shard(tmp_path: Path) -> None:
    checkpoint = build_deepseek_v3(tmp_path / "ckpt")
    shard = _shard(checkpoint, EH_PROJ)
    shard.unlink()
    _fails_cleanly(checkpoint.folder, tmp_path, f"names shard {shard.name} which is not in")


def test_index_that_is_not_json(tmp_path: Path) -> None:
    checkpoint = build_deepseek_v3(tmp_path / "ckpt")
    (checkpoint.folder / INDEX_FILE).write_text('{"weight_map": {')
    _fails_cleanly(checkpoint.folder, tmp_path, f"{INDEX_FILE} is not valid JSON")


def test_checkpoint_without_mtp_heads(tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    write_checkpoint(
        folder,
        layout="none",
        layer_indices=(),
        config={"model_type": "llama", "num_hidden_layers": 1},
        trunk=[Spec("model.layers.0.mlp.up_proj.weight", (64, 32), "BF16")],
        mtp=[],
    )
    error = _fails_cleanly(folder, tmp_path, "no MTP head tensors found")
    assert str(error) == no_heads_message(str(folder), {"num_hidden_layers": 1})
    assert str(error).startswith(
        f"no MTP head tensors found in {folder}; confirm this model has native MTP heads "
        "(checked for mtp.* keys and model.layers.1.* via config.json)"
    ), "{N} is filled in with the config's num_hidden_layers"
    assert "mlx-converted" in str(error)


def test_converted_checkpoint_whose_nextn_layer_was_stripped(tmp_path: Path) -> None:
    """An mlx-style conversion keeps num_nextn_predict_layers but drops model.layers.61.*."""
    checkpoint = build_deepseek_v3(tmp_path / "ckpt")
    _edit_index(
        checkpoint,
        lambda weight_map: [weight_map.pop(n) for n in list(weight_map) if ".layers.3." in n],
    )
    error = _fails_cleanly(checkpoint.folder, tmp_path, "the index is incomplete")
    assert "num_nextn_predict_layers = 1" in str(error)
    assert "model.layers.3.*" in str(error)
    assert "original release" in str(error)


def test_one_of_two_nextn_layers_missing(tmp_path: Path) -> None:
    checkpoint = build_deepseek_v3(tmp_path / "ckpt", nextn_layers=2)
    _edit_index(
        checkpoint,
        lambda weight_map: [weight_map.pop(n) for n in list(weight_map) if ".layers.4." in n],
    )
    error = _fails_cleanly(checkpoint.folder, tmp_path, r"no tensors for MTP layer\(s\) \[4\]")
    assert "it has layer(s) [3] only" in str(error) and "--allow-partial" in str(error)


def test_folder_that_is_not_a_checkpoint(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "README.md").write_text("just notes")
    _fails_cleanly(folder, tmp_path, f"{folder} is not a safetensors checkpoint")


def test_missing_source_folder(tmp_path: Path) -> None:
    with pytest.raises(ExtractError, match="does not exist"):
        LocalFolderSource(tmp_path / "nowhere")
    (tmp_path / "file.safetensors").write_bytes(b"x")
    with pytest.raises(ExtractError, match="is a file, not a checkpoint folder"):
        LocalFolderSource(tmp_path / "file.safetensors")


def test_output_folder_missing(tmp_path: Path) -> None:
    checkpoint = build_deepseek_v3(tmp_path / "ckpt")
    with pytest.raises(ExtractError, match=r"output folder .* does not exist"):
        extract_mtp(LocalFolderSource(checkpoint.folder), tmp_path / "no" / "mtp.safetensors")
