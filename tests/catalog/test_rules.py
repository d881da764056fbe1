"""Every rule an entry must follow on its own, each reported with its file, entry and field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.engine.catalog import (
    REQUIRED_FIELDS,
    Catalog,
    Problem,
    Severity,
    load_catalog,
    parse_entry,
    quant_marker,
    validate_entry,
)
from app.engine.errors import CatalogError
from tests.catalog.helpers import entry, write_catalog


def _problems(tmp_path: Path, *entries: dict) -> tuple[Path, list[Problem]]:
    path = write_catalog(tmp_path / "catalog.yaml", *entries)
    return path, Catalog.open([path]).problems()


def _only(problems: list[Problem]) -> Problem:
    assert len(problems) == 1, [str(p) for p in problems]
    return problems[0]


def test_a_valid_entry_has_no_problems(tmp_path: Path) -> None:
    _, problems = _problems(tmp_path, entry())
    assert problems == []


@pytest.mark.parametrize("field_name", [f for f in REQUIRED_FIELDS if f != "key"])
def test_missing_required_field_is_an_error_naming_file_entry_and_field(
    tmp_path: Path, field_name: str
) -> None:
    path, problems = _problems(tmp_path, entry(**{field_name: None}))
    problem = _only(problems)
    assert (problem.severity, problem.file, problem.key, problem.field) == (
        Severity.ERROR,
        path,
        "qwen3-6b-mlx-4bit",
        field_name,
    )
    assert f"{field_name} is missing; add it" in problem.message
    assert str(problem).startswith(f"error: {path}:2: entry 'qwen3-6b-mlx-4bit', field")


def test_entry_without_key_is_named_by_its_position(tmp_path: Path) -> None:
    nameless = entry("second")
    del nameless["key"]
    path, problems = _problems(tmp_path, entry("first"), nameless)
    problem = _only(problems)
    assert (problem.key, problem.index, problem.field, problem.line) == (None, 1, "key", 11)
    assert f"{path}:11: entry #2, field 'key': key is missing" in str(problem)


@pytest.mark.parametrize("bad_key", ["Qwen3-6B", "qwen3_6b", "qwen3--6b", "-qwen", "qwen 3"])
def test_key_must_be_lowercase_kebab(tmp_path: Path, bad_key: str) -> None:
    _, problems = _problems(tmp_path, entry(bad_key, output_name="o", hf_repo="acme/o"))
    problem = _only(problems)
    assert (problem.field, problem.key) == ("key", None)
    assert f"key {bad_key!r} is not lowercase-kebab" in problem.message


@pytest.mark.parametrize(
    "field_name", ["source_model", "hf_repo", "mtp_source_repo", "mtp_sidecar_repo"]
)
@pytest.mark.parametrize("bad_repo", ["not-a-repo", "a/b/c", "acme/bad--name", "acme/x..y"])
def test_repo_fields_must_be_hub_repo_ids(tmp_path: Path, field_name: str, bad_repo: str) -> None:
    _, problems = _problems(tmp_path, entry(**{field_name: bad_repo}))
    problem = _only(problems)
    assert (problem.severity, problem.field) == (Severity.ERROR, field_name)
    assert f"{field_name} {bad_repo!r} is not a Hub repo id; write it as owner/name" in (
        problem.message
    )


def test_quant_written_as_a_number_must_be_quoted(tmp_path: Path) -> None:
    _, problems = _problems(tmp_path, entry(quant=8))
    problem = _only(problems)
    assert problem.field == "quant"
    assert 'put the value in quotes, e.g. `quant: "8"`' in problem.message


def test_output_name_must_be_a_plain_name(tmp_path: Path) -> None:
    _, problems = _problems(tmp_path, entry(output_name="models/qwen"))
    assert "must be a plain file or folder name" in _only(problems).message


def test_slices_must_be_a_list(tmp_path: Path) -> None:
    _, problems = _problems(tmp_path, entry(slices="full"))
    problem = _only(problems)
    assert problem.field == "slices"
    assert "e.g. `slices: [full]`" in problem.message


def test_hf_collection_must_be_a_slug(tmp_path: Path) -> None:
    _, problems = _problems(tmp_path, entry(hf_collection="MTP Sidecars"))
    problem = _only(problems)
    assert problem.field == "hf_collection"
    assert "write it as owner/slug" in problem.message


@pytest.mark.parametrize(
    ("present", "missing"),
    [("mtp_source_repo", "mtp_sidecar_repo"), ("mtp_sidecar_repo", "mtp_source_repo")],
)
def test_mtp_fields_go_together(tmp_path: Path, present: str, missing: str) -> None:
    path, problems = _problems(tmp_path, entry(**{missing: None}))
    problem = _only(problems)
    assert (problem.file, problem.key, problem.field) == (path, "qwen3-6b-mlx-4bit", missing)
    assert f"{present} is set but {missing} is missing" in problem.message
    assert "set both" in problem.message and "or remove both" in problem.message


def test_entry_without_any_mtp_field_is_valid(tmp_path: Path) -> None:
    _, problems = _problems(tmp_path, entry(mtp_source_repo=None, mtp_sidecar_repo=None))
    assert problems == []


def test_sidecar_cannot_be_the_source_repo(tmp_path: Path) -> None:
    _, problems = _problems(tmp_path, entry(mtp_sidecar_repo="Qwen/Qwen3-6B"))
    problem = _only(problems)
    assert problem.field == "mtp_sidecar_repo"
    assert "is the same repo as mtp_source_repo" in problem.message
    assert "e.g. `acme/qwen3-6b-mtp`" in problem.message


def test_sidecar_cannot_be_the_entry_hf_repo(tmp_path: Path) -> None:
    _, problems = _problems(tmp_path, entry(hf_repo="acme/qwen3-6b-mtp"))
    problem = _only(problems)
    assert problem.field == "mtp_sidecar_repo"
    assert "is the same repo as hf_repo; the sidecar needs a repo of its own" in problem.message
    assert "rename hf_repo" in problem.message


@pytest.mark.parametrize(
    ("sidecar", "marker"),
    [
        ("acme/qwen3-6b-mtp-FP8", "FP8"),
        ("acme/qwen3-6b-AWQ-mtp", "AWQ"),
        ("acme/qwen3-6b-mtp-4bit", "4bit"),
        ("acme/qwen3-6b-mtp-GGUF", "GGUF"),
        ("acme/qwen3-6b-mtp-Q4_K_M", "Q4_K_M"),
        ("acme/qwen3-6b-mtp-int4", "int4"),
        ("acme/qwen3-6b-mtp-q4k", "q4k"),
    ],
)
def test_quant_suffix_on_sidecar_is_a_warning(tmp_path: Path, sidecar: str, marker: str) -> None:
    path, problems = _problems(tmp_path, entry(mtp_sidecar_repo=sidecar))
    problem = _only(problems)
    assert (problem.severity, problem.file, problem.key, problem.field) == (
        Severity.WARNING,
        path,
        "qwen3-6b-mlx-4bit",
        "mtp_sidecar_repo",
    )
    assert f"carries the quant marker {marker!r}" in problem.message
    assert "e.g. `acme/qwen3-6b-mtp`" in problem.message
    load_catalog([path])  # a warning does not stop the catalog from loading


@pytest.mark.parametrize(
    "sidecar",
    [
        "acme/qwen3-6b-mtp",
        "acme/deepseek-v3-0324-mtp",
        "acme/qwen3-next-80b-a3b-instruct-mtp",
        "acme/mimo-7b-rl-mtp",
        "acme/glm-4-5-air-mtp",
    ],
)
def test_base_model_names_are_not_mistaken_for_quant_markers(sidecar: str) -> None:
    assert quant_marker(sidecar) is None


def test_validate_entry_works_on_fields_being_typed() -> None:
    half_typed = {"key": "new-entry", "source_model": "Qwen/"}
    problems = validate_entry(half_typed)
    assert {p.field for p in problems} == {
        "source_model",
        "quant",
        "tier",
        "slices",
        "output_name",
        "hf_repo",
    }
    assert all(p.key == "new-entry" and p.file is None for p in problems)


def test_parse_entry_refuses_an_invalid_entry_listing_every_error() -> None:
    with pytest.raises(CatalogError) as caught:
        parse_entry(entry(quant=None, hf_repo="nope"))
    message = str(caught.value)
    assert "field 'quant': quant is missing" in message
    assert "field 'hf_repo': hf_repo 'nope' is not a Hub repo id" in message


def test_file_without_models_list(tmp_path: Path) -> None:
    path = tmp_path / "catalog.yaml"
    path.write_text("entries:\n  - key: a\n", encoding="utf-8")
    problem = _only(Catalog.open([path]).problems())
    assert (problem.file, problem.field) == (path, "models")
    assert "has no `models:` list" in problem.message


def test_entry_that_is_not_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "catalog.yaml"
    path.write_text("models:\n  - just-a-string\n", encoding="utf-8")
    problem = _only(Catalog.open([path]).problems())
    assert (problem.index, problem.line) == (0, 2)
    assert "not a mapping of fields" in problem.message


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "catalog.yaml"
    path.write_text("models:\n  - key: a\n    quant: [4bit\n", encoding="utf-8")
    with pytest.raises(CatalogError, match=rf"{re.escape(str(path))}:\d+: not valid YAML"):
        Catalog.open([path])


def test_a_field_written_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "catalog.yaml"
    path.write_text("models:\n  - key: a\n    key: b\n", encoding="utf-8")
    with pytest.raises(CatalogError, match=rf"{re.escape(str(path))}:3: not valid YAML"):
        Catalog.open([path])


def test_missing_file_says_to_check_the_path(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="does not exist; check the path given to --catalog"):
        Catalog.open([tmp_path / "nope.yaml"])


def test_load_catalog_raises_listing_all_errors(tmp_path: Path) -> None:
    path = write_catalog(
        tmp_path / "catalog.yaml", entry("a", quant=None), entry("b", mtp_sidecar_repo=None)
    )
    with pytest.raises(CatalogError) as caught:
        load_catalog([path])
    message = str(caught.value)
    assert "the catalog has 2 error(s)" in message
    assert f"{path}:2: entry 'a', field 'quant'" in message
    assert f"{path}:10: entry 'b', field 'mtp_sidecar_repo'" in message
