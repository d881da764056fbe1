"""``mtp-studio catalog validate|list|show`` run through the real CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

from app.cli import main
from tests.catalog.helpers import entry, write_catalog


def test_validate_default_catalog_is_clean(capsys) -> None:
    assert main(["catalog", "validate"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("catalog OK; ")
    assert "entries in 1 file: 0 errors, 0 warnings" in out


def test_validate_prints_every_problem_and_fails_on_errors(tmp_path: Path, capsys) -> None:
    a = write_catalog(tmp_path / "a.yaml", entry("one", mtp_sidecar_repo="acme/qwen3-6b-mtp-FP8"))
    no_mtp = {"mtp_source_repo": None, "mtp_sidecar_repo": None}
    b = write_catalog(
        tmp_path / "b.yaml", entry("one", output_name="other", hf_repo="acme/b", **no_mtp)
    )
    code = main(["catalog", "validate", "--catalog", str(a), "--catalog", str(b)])
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert code == 2
    assert lines[0].startswith(f"warning: {a}:10: entry 'one', field 'mtp_sidecar_repo': ")
    assert lines[1].startswith(f"error: {b}:2: entry 'one', field 'key': duplicate key 'one'")
    assert len(lines) == 2
    assert captured.err == (
        "mtp-studio: error: catalog is invalid; 2 entries in 2 files: 1 error, 1 warning\n"
    )


def test_validate_passes_with_warnings_only(tmp_path: Path, capsys) -> None:
    a = write_catalog(tmp_path / "a.yaml", entry("one", mtp_sidecar_repo="acme/qwen3-6b-mtp-AWQ"))
    assert main(["catalog", "validate", "--catalog", str(a)]) == 0
    out = capsys.readouterr().out
    assert "carries the quant marker 'AWQ'" in out
    assert out.endswith("catalog OK; 1 entry in 1 file: 0 errors, 1 warning\n")


def test_list_prints_a_table(tmp_path: Path, capsys) -> None:
    path = write_catalog(
        tmp_path / "a.yaml",
        entry("qwen3-6b-mlx-4bit"),
        entry("plain", quant="Q4_K_M", mtp_source_repo=None, mtp_sidecar_repo=None),
    )
    assert main(["catalog", "list", "--catalog", str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "KEY                SOURCE         QUANT   TIER   SIDECAR",
        "qwen3-6b-mlx-4bit  Qwen/Qwen3-6B  4bit    small  acme/qwen3-6b-mtp",
        "plain              Qwen/Qwen3-6B  Q4_K_M  small  -",
    ]


def test_list_json(tmp_path: Path, capsys) -> None:
    path = write_catalog(tmp_path / "a.yaml", entry("one", mtp_quant="q4k"))
    assert main(["catalog", "list", "--catalog", str(path), "--json"]) == 0
    [item] = json.loads(capsys.readouterr().out)
    assert item["fields"] == {**entry("one"), "mtp_quant": "q4k"}
    assert (item["base_model"], item["has_sidecar"], item["file"]) == (
        "Qwen/Qwen3-6B",
        True,
        str(path),
    )


def test_list_refuses_an_invalid_catalog(tmp_path: Path, capsys) -> None:
    path = write_catalog(tmp_path / "a.yaml", entry("one", quant=None))
    assert main(["catalog", "list", "--catalog", str(path)]) == 2
    err = capsys.readouterr().err
    assert "the catalog has 1 error(s)" in err
    assert f"{path}:2: entry 'one', field 'quant': quant is missing" in err


def test_show_prints_the_entry(tmp_path: Path, capsys) -> None:
    path = write_catalog(tmp_path / "a.yaml", entry("one", notes="kept"))
    assert main(["catalog", "show", "one", "--catalog", str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "key               one",
        "source_model      Qwen/Qwen3-6B",
        "quant             4bit",
        "tier              small",
        "slices            full",
        "output_name       one-out",
        "hf_repo           acme/one",
        "mtp_source_repo   Qwen/Qwen3-6B",
        "mtp_sidecar_repo  acme/qwen3-6b-mtp",
        "notes             kept",
        "base_model        Qwen/Qwen3-6B",
        f"file              {path}",
    ]


def test_show_json_and_unknown_key(tmp_path: Path, capsys) -> None:
    path = write_catalog(tmp_path / "a.yaml", entry("one"))
    assert main(["catalog", "show", "one", "--catalog", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fields"]["key"] == "one"
    assert main(["catalog", "show", "two", "--catalog", str(path)]) == 2
    assert "no catalog entry with key 'two'" in capsys.readouterr().err


def test_show_from_the_default_catalog(capsys) -> None:
    assert main(["catalog", "show", "mimo-7b-rl-mlx-4bit"]) == 0
    out = capsys.readouterr().out
    assert "mtp_sidecar_repo  mtp-studio/mimo-7b-rl-mtp" in out
    assert "base_model        XiaomiMiMo/MiMo-7B-RL" in out
