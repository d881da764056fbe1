"""``publish --dry-run`` prints the plan of issue 2 exactly, and the engine plan behind it."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main
from app.engine.catalog import load_catalog
from app.engine.errors import PublishError
from app.engine.publish_plan import ArtifactKind, artifact_kinds, plan_publish
from app.engine.scratch import SCRATCH_ENV
from tests.catalog.helpers import entry, write_catalog


@pytest.fixture(autouse=True)
def _isolated_places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SCRATCH_ENV, raising=False)
    monkeypatch.setenv("MTP_STUDIO_HOME", str(tmp_path / "app-home"))


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    return write_catalog(
        tmp_path / "acme.yaml",
        entry("qwen3-6b-mlx-4bit"),
        entry("plain-model", mtp_source_repo=None, mtp_sidecar_repo=None),
    )


def _expected(scratch: Path) -> str:
    return (
        "mtp source repo: hf://Qwen/Qwen3-6B\n"
        "mtp sidecar repo: hf://acme/qwen3-6b-mtp/mtp.safetensors\n"
        "mtp precision: bf16 (unquantized)\n"
        f"mtp output path: {scratch}/acme--qwen3-6b-mtp-mtp.safetensors\n"
    )


@pytest.mark.parametrize("artifact", ["mtp", "all"])
def test_dry_run_prints_the_plan_exactly(
    tmp_path: Path, catalog: Path, capsys, artifact: str
) -> None:
    scratch = tmp_path / "scratch"
    argv = ["publish", "--model", "qwen3-6b-mlx-4bit", "--artifact", artifact, "--dry-run"]
    code = main([*argv, "--catalog", str(catalog), "--scratch", str(scratch)])
    assert (code, capsys.readouterr().out) == (0, _expected(scratch))
    assert not scratch.exists()


def test_dry_run_scratch_from_environment(tmp_path: Path, catalog: Path, capsys, monkeypatch):
    monkeypatch.setenv(SCRATCH_ENV, str(tmp_path / "env-scratch"))
    argv = ["publish", "--model", "qwen3-6b-mlx-4bit", "--dry-run", "--catalog", str(catalog)]
    assert main(argv) == 0
    assert capsys.readouterr().out == _expected(tmp_path / "env-scratch")


def test_dry_run_scratch_defaults_to_the_user_cache(tmp_path: Path, catalog: Path, capsys):
    argv = ["publish", "--model", "qwen3-6b-mlx-4bit", "--dry-run", "--catalog", str(catalog)]
    assert main(argv) == 0
    assert capsys.readouterr().out == _expected(tmp_path / "app-home" / "cache" / "scratch")


def test_entry_without_mtp_fields_gets_the_app_md_error(catalog: Path, capsys) -> None:
    argv = ["publish", "--model", "plain-model", "--artifact", "mtp", "--dry-run"]
    assert main([*argv, "--catalog", str(catalog)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "mtp-studio: error: no MTP sidecar configured for plain-model; add mtp_source_repo "
        "and mtp_sidecar_repo to the catalog entry\n"
    )


def test_unknown_model_key_is_a_clear_error(catalog: Path, capsys) -> None:
    argv = ["publish", "--model", "qwen3-6b-mlx", "--dry-run", "--catalog", str(catalog)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "no catalog entry with key 'qwen3-6b-mlx'" in err
    assert "did you mean qwen3-6b-mlx-4bit" in err


def test_dry_run_works_on_the_default_catalog(tmp_path: Path, capsys) -> None:
    argv = ["publish", "--model", "deepseek-v3-0324-gguf-q4-k-m", "--dry-run"]
    assert main([*argv, "--scratch", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "mtp source repo: hf://deepseek-ai/DeepSeek-V3-0324",
        "mtp sidecar repo: hf://mtp-studio/deepseek-v3-0324-mtp/mtp.safetensors",
        "mtp precision: bf16 (unquantized)",
        f"mtp output path: {tmp_path}/mtp-studio--deepseek-v3-0324-mtp-mtp.safetensors",
    ]


def test_unknown_artifact_is_refused_by_the_parser(catalog: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["publish", "--model", "x", "--artifact", "gguf", "--dry-run"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'gguf'" in capsys.readouterr().err


def test_plan_for_the_gui_wizard(tmp_path: Path, catalog: Path) -> None:
    qwen = load_catalog([catalog]).entry("qwen3-6b-mlx-4bit")
    plan = plan_publish(qwen, artifact_kinds("all"), tmp_path)
    assert plan.mtp is not None
    assert (plan.mtp.source_repo, plan.mtp.sidecar_repo, plan.mtp.filename) == (
        "Qwen/Qwen3-6B",
        "acme/qwen3-6b-mtp",
        "mtp.safetensors",
    )
    assert plan.mtp.precision == "bf16"
    assert plan.mtp.output_path == tmp_path / "acme--qwen3-6b-mtp-mtp.safetensors"
    assert artifact_kinds("mtp") == (ArtifactKind.MTP,)
    with pytest.raises(PublishError, match="unknown artifact 'vision'; choose one of mtp, all"):
        artifact_kinds("vision")
