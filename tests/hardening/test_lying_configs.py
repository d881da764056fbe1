"""Issue 23: a checkpoint whose config.json or index lies is refused at once, in one clear line.

Each case edits a real synthetic checkpoint the way a hostile repo would and runs the real
extractor; the error must name the file and say what to do, and nothing may be written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.engine.chat.model_files import describe_model
from app.engine.errors import ExtractError
from app.engine.mtp import LocalFolderSource, extract_mtp
from tests.mtp.checkpoints import INDEX_FILE, build_deepseek_v3, build_qwen35


def _refused(folder: Path, tmp_path: Path, match: str) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    with pytest.raises(ExtractError, match=match):
        extract_mtp(LocalFolderSource(folder), out_dir / "mtp.safetensors")
    assert list(out_dir.iterdir()) == []


def _set_config(folder: Path, **values: object) -> None:
    path = folder / "config.json"
    config = json.loads(path.read_text())
    config.update(values)
    path.write_text(json.dumps(config))


def test_nextn_count_of_a_trillion_is_refused(tmp_path: Path) -> None:
    checkpoint = build_deepseek_v3(tmp_path / "ckpt")
    _set_config(checkpoint.folder, num_nextn_predict_layers=10**12)
    _refused(checkpoint.folder, tmp_path, r"declares num_nextn_predict_layers = 1000000000000 MTP")


def test_qwen_count_of_a_trillion_is_refused(tmp_path: Path) -> None:
    checkpoint = build_qwen35(tmp_path / "ckpt")
    _set_config(checkpoint.folder, mtp_num_hidden_layers=10**12)
    _refused(checkpoint.folder, tmp_path, r"mtp_num_hidden_layers = 1000000000000 .*holds 1\)")


def test_deeply_nested_config_is_refused(tmp_path: Path) -> None:
    checkpoint = build_deepseek_v3(tmp_path / "ckpt")
    (checkpoint.folder / "config.json").write_text('{"a":' + "[" * 50_000 + "]" * 50_000 + "}")
    _refused(checkpoint.folder, tmp_path, r"config.json nests deeper than the 64 levels")


def test_moderately_nested_config_is_refused_too(tmp_path: Path) -> None:
    checkpoint = build_deepseek_v3(tmp_path / "ckpt")
    (checkpoint.folder / "config.json").write_text('{"a":' + "[" * 500 + "]" * 500 + "}")
    _refused(checkpoint.folder, tmp_path, r"config.json nests deeper than the 64 levels")


def test_fifty_thousand_digit_number_in_the_index_is_refused(tmp_path: Path) -> None:
    checkpoint = build_deepseek_v3(tmp_path / "ckpt")
    (checkpoint.folder / INDEX_FILE).write_text(
        '{"metadata": {"total_size": ' + "9" * 50_000 + "}}"
    )
    _refused(checkpoint.folder, tmp_path, rf"{INDEX_FILE} is not valid JSON: Exceeds the limit")


def test_a_model_folder_with_a_deeply_nested_config_is_described_as_unreadable(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("[" * 50_000 + "]" * 50_000)
    (folder / "model.safetensors").write_bytes(bytes(8))
    problem = describe_model(folder).problem
    assert problem is not None and "config.json cannot be read (nests deeper" in problem
