"""Layout cross-checks: what is found against what the config declares, and honest messages.

A MiMo checkpoint whose config declares 2 MTP layers but holds 1 must not be extracted short in
silence; the user can ask for the layers present instead (``--allow-partial``), and the sidecar
then says which are missing. A model released without heads is told apart from a stripped copy,
and the sidecar names the family, since one layout serves many.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from safetensors import safe_open

from app.cli import main
from app.engine.errors import ExtractError
from app.engine.jobs import JobContext, JobEvent, LogEvent
from app.engine.mtp import LocalFolderSource, extract_mtp
from tests.mtp.checkpoints import (
    Spec,
    SyntheticCheckpoint,
    build_deepseek_v3,
    build_mimo,
    write_checkpoint,
)


def copy_with_config(checkpoint: SyntheticCheckpoint, folder: Path, **changes: object) -> Path:
    shutil.copytree(checkpoint.folder, folder)
    config = json.loads((folder / "config.json").read_text())
    scope = config.get("text_config", config)
    scope.update(changes)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def metadata_of(path: Path) -> dict[str, str]:
    with safe_open(str(path), framework="np") as sidecar:
        return sidecar.metadata()


@pytest.fixture(scope="module")
def mimo(tmp_path_factory: pytest.TempPathFactory) -> SyntheticCheckpoint:
    return build_mimo(tmp_path_factory.mktemp("mimo") / "ckpt")


def test_mimo_declaring_two_layers_with_one_present_says_so(
    mimo: SyntheticCheckpoint, tmp_path: Path
) -> None:
    folder = copy_with_config(mimo, tmp_path / "ckpt", num_nextn_predict_layers=2)
    out = tmp_path / "out" / "mtp.safetensors"
    out.parent.mkdir()
    with pytest.raises(ExtractError) as caught:
        extract_mtp(LocalFolderSource(folder), out)
    message = str(caught.value)
    assert "num_nextn_predict_layers = 2" in message
    assert "MTP layer(s) [1] (model.mtp_layers.1.*)" in message
    assert "it has layer(s) [0] only" in message and "--allow-partial" in message
    assert list(out.parent.iterdir()) == []


def test_partial_extraction_on_request_records_the_missing_layers(
    mimo: SyntheticCheckpoint, tmp_path: Path
) -> None:
    folder = copy_with_config(mimo, tmp_path / "ckpt", num_nextn_predict_layers=2)
    events: list[JobEvent] = []
    out = tmp_path / "mtp.safetensors"
    result = extract_mtp(
        LocalFolderSource(folder), out, JobContext(emit=events.append), allow_partial=True
    )
    assert (result.layer_indices, result.missing_layers) == ((0,), (1,))
    assert result.tensor_count == len(mimo.mtp_names)
    metadata = metadata_of(out)
    assert metadata["mtp_missing_layers"] == "1"
    assert metadata["mtp_family"] == "mimo"
    logs = [e.message for e in events if isinstance(e, LogEvent)]
    assert any("partial extraction: layer(s) [1]" in line for line in logs)


def test_qwen_declaring_more_mtp_layers_than_present_says_so(
    checkpoints: dict[str, SyntheticCheckpoint], tmp_path: Path
) -> None:
    folder = copy_with_config(
        checkpoints["qwen35-bf16"], tmp_path / "ckpt", mtp_num_hidden_layers=3
    )
    with pytest.raises(
        ExtractError, match=r"mtp_num_hidden_layers = 3.*\[1, 2\] \(mtp\.layers\.1\.\*\)"
    ):
        extract_mtp(LocalFolderSource(folder), tmp_path / "mtp.safetensors")


def test_nextn_partial_extraction_takes_the_layers_present(tmp_path: Path) -> None:
    checkpoint = build_deepseek_v3(tmp_path / "ckpt", nextn_layers=2)
    index_path = checkpoint.folder / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    index["weight_map"] = {
        name: shard for name, shard in index["weight_map"].items() if ".layers.4." not in name
    }
    index_path.write_text(json.dumps(index))
    with pytest.raises(ExtractError, match=r"no tensors for MTP layer\(s\) \[4\]"):
        extract_mtp(LocalFolderSource(checkpoint.folder), tmp_path / "a.safetensors")
    result = extract_mtp(
        LocalFolderSource(checkpoint.folder), tmp_path / "b.safetensors", allow_partial=True
    )
    assert (result.layer_indices, result.missing_layers) == ((3,), (4,))


def test_the_cli_extracts_partially_when_asked(
    mimo: SyntheticCheckpoint, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    folder = copy_with_config(mimo, tmp_path / "ckpt", num_nextn_predict_layers=2)
    out = tmp_path / "mtp.safetensors"
    assert main(["extract", "--source", str(folder), "--out", str(out)]) == 2
    assert "--allow-partial" in capsys.readouterr().err
    assert not out.exists()
    assert main(["extract", "--source", str(folder), "--out", str(out), "--allow-partial"]) == 0
    assert "missing layers: 1 (partial)" in capsys.readouterr().out


def test_a_model_released_without_heads_is_not_blamed_on_a_converter(tmp_path: Path) -> None:
    """Kimi K2 is DeepSeek V3 in its naming but sets num_nextn_predict_layers = 0."""
    folder = tmp_path / "kimi-k2"
    write_checkpoint(
        folder,
        layout="none",
        layer_indices=(),
        config={"model_type": "kimi_k2", "num_hidden_layers": 1, "num_nextn_predict_layers": 0},
        trunk=[Spec("model.layers.0.mlp.up_proj.weight", (64, 32), "BF16")],
        mtp=[],
    )
    with pytest.raises(ExtractError) as caught:
        extract_mtp(LocalFolderSource(folder), tmp_path / "mtp.safetensors")
    message = str(caught.value)
    assert "num_nextn_predict_layers = 0" in message and "released without MTP heads" in message
    assert "converter" not in message


def test_ernie_is_detected_not_reported_as_stripped(
    checkpoints: dict[str, SyntheticCheckpoint], tmp_path: Path
) -> None:
    out = tmp_path / "mtp.safetensors"
    result = extract_mtp(LocalFolderSource(checkpoints["ernie45"].folder), out)
    assert (result.layout, result.family, result.layer_indices) == (
        "ernie-mtp",
        "ernie4_5_moe",
        (0,),
    )
    names = set(safe_open(str(out), framework="np").keys())
    assert {"model.mtp_linear_proj.0.weight", "model.mtp_block.0.mlp.down_proj.weight"} <= names


@pytest.mark.parametrize(
    ("name", "family"),
    [("glm45v-wrapped-nextn", "glm4v_moe"), ("kimi-k25-wrapped-nextn", "kimi_k25")],
)
def test_nextn_under_a_wrapped_prefix_with_config_under_text_config(
    checkpoints: dict[str, SyntheticCheckpoint], tmp_path: Path, name: str, family: str
) -> None:
    result = extract_mtp(LocalFolderSource(checkpoints[name].folder), tmp_path / "m.safetensors")
    assert (result.layout, result.family, result.layer_indices) == ("deepseek-nextn", family, (3,))
    assert result.tensor_count == len(checkpoints[name].mtp_names)


@pytest.mark.parametrize(
    "family", ["longcat_flash", "mimo_v2_flash", "nemotron_h", "exaone_moe", "deepseek_v4"]
)
def test_the_sidecar_names_the_family_not_only_the_layout(
    checkpoints: dict[str, SyntheticCheckpoint], tmp_path: Path, family: str
) -> None:
    folder = tmp_path / "ckpt"
    shutil.copytree(checkpoints["qwen35-bf16"].folder, folder)
    config = json.loads((folder / "config.json").read_text())
    config["model_type"] = family
    (folder / "config.json").write_text(json.dumps(config))
    out = tmp_path / "mtp.safetensors"
    extract_mtp(LocalFolderSource(folder), out)
    metadata = metadata_of(out)
    assert (metadata["mtp_layout"], metadata["mtp_family"]) == ("qwen-mtp", family)
