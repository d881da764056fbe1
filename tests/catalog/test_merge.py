"""Several catalog files read as one: uniqueness and sidecar rules hold across files."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.catalog import Catalog, Severity, load_catalog
from app.engine.errors import CatalogError
from tests.catalog.helpers import entry, write_catalog


def _two_files(tmp_path: Path, first: dict, second: dict) -> tuple[Path, Path, Catalog]:
    a = write_catalog(tmp_path / "a.yaml", first)
    b = write_catalog(tmp_path / "b.yaml", second)
    return a, b, Catalog.open([a, b])


def test_entries_of_all_files_are_merged_in_order(tmp_path: Path) -> None:
    a, b, catalog = _two_files(tmp_path, entry("one"), entry("two"))
    entries = catalog.entries()
    assert [(e.key, e.source_file) for e in entries] == [("one", a), ("two", b)]
    assert catalog.entry("two").hf_repo == "acme/two"


@pytest.mark.parametrize(
    ("field_name", "first_value", "second_value"),
    [
        ("key", "same-key", "same-key"),
        ("output_name", "Qwen3-6B-4bit", "Qwen3-6B-4bit"),
        ("hf_repo", "acme/Qwen3-6B-4bit", "ACME/qwen3-6b-4bit"),
    ],
)
def test_duplicate_across_files_is_an_error_on_the_later_entry(
    tmp_path: Path, field_name: str, first_value: str, second_value: str
) -> None:
    first = entry("first", **{field_name: first_value})
    second = entry("second", **{field_name: second_value})
    a, b, catalog = _two_files(tmp_path, first, second)
    [problem] = catalog.problems()
    assert (problem.severity, problem.file, problem.field) == (Severity.ERROR, b, field_name)
    assert f"duplicate {field_name} {second_value!r}" in problem.message
    assert f"entry '{first['key']}' in {a} already uses it" in problem.message
    assert "must be unique across all catalog files" in problem.message
    with pytest.raises(CatalogError, match=f"duplicate {field_name}"):
        load_catalog([a, b])


def test_sidecar_repo_that_is_another_entry_model_repo(tmp_path: Path) -> None:
    a, b, catalog = _two_files(
        tmp_path,
        entry("model", hf_repo="acme/qwen3-6b-mtp", mtp_source_repo=None, mtp_sidecar_repo=None),
        entry("quant"),
    )
    [problem] = catalog.problems()
    assert (problem.file, problem.key, problem.field) == (b, "quant", "mtp_sidecar_repo")
    assert f"is the hf_repo of entry 'model' in {a}" in problem.message


def test_one_sidecar_cannot_serve_two_base_models(tmp_path: Path) -> None:
    a, b, catalog = _two_files(
        tmp_path,
        entry("qwen"),
        entry(
            "mimo", source_model="XiaomiMiMo/MiMo-7B-RL", mtp_source_repo="XiaomiMiMo/MiMo-7B-RL"
        ),
    )
    [problem] = catalog.problems()
    assert (problem.severity, problem.file, problem.key) == (Severity.ERROR, b, "mimo")
    assert "would hold the heads of 'XiaomiMiMo/MiMo-7B-RL'" in problem.message
    assert f"entry 'qwen' in {a} fills it from 'Qwen/Qwen3-6B'" in problem.message


def test_same_base_model_with_two_sidecars_is_a_warning(tmp_path: Path) -> None:
    a, b, catalog = _two_files(
        tmp_path,
        entry("qwen-mlx"),
        entry("qwen-gguf", quant="Q4_K_M", mtp_sidecar_repo="acme/qwen3-6b-heads"),
    )
    [problem] = catalog.problems()
    assert (problem.severity, problem.file, problem.key, problem.field) == (
        Severity.WARNING,
        b,
        "qwen-gguf",
        "mtp_sidecar_repo",
    )
    assert "base model 'Qwen/Qwen3-6B' has two sidecars" in problem.message
    assert f"entry 'qwen-mlx' in {a} points at 'acme/qwen3-6b-mtp'" in problem.message
    assert len(load_catalog([a, b]).entries()) == 2


def test_quants_of_one_base_sharing_a_sidecar_are_clean(tmp_path: Path) -> None:
    _, _, catalog = _two_files(tmp_path, entry("qwen-mlx"), entry("qwen-gguf", quant="Q4_K_M"))
    assert catalog.problems() == []
    assert {e.base_model for e in catalog.entries()} == {"Qwen/Qwen3-6B"}


def test_unknown_key_suggests_close_matches(tmp_path: Path) -> None:
    _, _, catalog = _two_files(tmp_path, entry("qwen-mlx"), entry("qwen-gguf"))
    with pytest.raises(
        CatalogError, match=r"no catalog entry with key 'qwen-gguff'.*did you mean qwen-gguf"
    ):
        catalog.entry("qwen-gguff")


def test_candidate_check_sees_clashes_with_other_entries_while_typing(tmp_path: Path) -> None:
    a, _, catalog = _two_files(tmp_path, entry("qwen-mlx"), entry("qwen-gguf"))
    edited = entry("qwen-gguf", hf_repo="acme/qwen-mlx")
    [problem] = catalog.check_candidate(edited, replacing="qwen-gguf")
    assert (problem.field, problem.key) == ("hf_repo", "qwen-gguf")
    assert f"entry 'qwen-mlx' in {a} already uses it" in problem.message
    assert catalog.check_candidate(entry("qwen-gguf"), replacing="qwen-gguf") == []
    new_problems = catalog.check_candidate(entry("qwen-mlx"))
    assert {p.field for p in new_problems} == {"key", "output_name", "hf_repo"}
