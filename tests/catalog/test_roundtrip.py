"""Editing and saving a catalog keeps what a person wrote, and never leaves a broken file."""

from __future__ import annotations

import dataclasses
import re
from datetime import date
from pathlib import Path

import pytest

from app.engine.catalog import Catalog, load_catalog, parse_entry
from app.engine.errors import CatalogError
from tests.catalog.helpers import entry as entry_fields

HAND_WRITTEN = """\
# My catalog: models I publish myself.
version: 3  # a top-level field this app does not know
models:
  # The small Qwen, two quants sharing one sidecar.
  - key: qwen3-6b-mlx-4bit
    source_model: Qwen/Qwen3-6B
    quant: "4bit"          # quoted on purpose
    tier: smoke
    slices: [full]
    output_name: qwen3-6b-mlx-4bit
    hf_repo: acme/qwen3-6b-mlx-4bit
    mtp_source_repo: Qwen/Qwen3-6B
    mtp_sidecar_repo: acme/qwen3-6b-mtp
    mtp_quant: q4k         # a field from an older tool
    notes:
      owner: 'release team'
      checked: [2025-01-02, 2025-02-03]

  - key: qwen3-6b-gguf-q4-k-m
    source_model: Qwen/Qwen3-6B
    quant: Q4_K_M
    tier: smoke
    slices:
      - full
      - expert-server
    output_name: qwen3-6b-Q4_K_M.gguf
    hf_repo: acme/qwen3-6b-Q4_K_M-GGUF
    mtp_source_repo: Qwen/Qwen3-6B
    mtp_sidecar_repo: acme/qwen3-6b-mtp
"""


@pytest.fixture
def catalog_path(tmp_path: Path) -> Path:
    path = tmp_path / "mine.yaml"
    path.write_text(HAND_WRITTEN, encoding="utf-8")
    return path


def _changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    old, new = before.splitlines(), after.splitlines()
    assert len(old) == len(new), after
    return [(a, b) for a, b in zip(old, new, strict=True) if a != b]


def test_rewriting_unchanged_entries_gives_back_the_same_bytes(catalog_path: Path) -> None:
    catalog = Catalog.open([catalog_path])
    for entry in catalog.entries():
        catalog.replace_entry(entry.key, entry)
    assert catalog.save() == [catalog_path]
    assert catalog_path.read_text(encoding="utf-8") == HAND_WRITTEN


def test_editing_one_field_changes_only_that_line(catalog_path: Path) -> None:
    catalog = Catalog.open([catalog_path])
    entry = catalog.entry("qwen3-6b-gguf-q4-k-m")
    catalog.replace_entry(entry.key, dataclasses.replace(entry, tier="medium"))
    catalog.save()
    after = catalog_path.read_text(encoding="utf-8")
    assert _changed_lines(HAND_WRITTEN, after) == [("    tier: smoke", "    tier: medium")]


def test_unknown_fields_and_comments_survive_an_edit(catalog_path: Path) -> None:
    catalog = Catalog.open([catalog_path])
    entry = catalog.entry("qwen3-6b-mlx-4bit")
    assert entry.extra == {
        "mtp_quant": "q4k",
        "notes": {"owner": "release team", "checked": [date(2025, 1, 2), date(2025, 2, 3)]},
    }
    catalog.replace_entry(entry.key, dataclasses.replace(entry, quant="8bit", slices=("full", "x")))
    catalog.save()

    after = catalog_path.read_text(encoding="utf-8")
    for kept in (
        "# My catalog: models I publish myself.",
        "version: 3  # a top-level field this app does not know",
        "# The small Qwen, two quants sharing one sidecar.",
        "mtp_quant: q4k         # a field from an older tool",
        "      owner: 'release team'",
        "    slices: [full, x]",
    ):
        assert kept in after
    reloaded = load_catalog([catalog_path]).entry("qwen3-6b-mlx-4bit")
    assert (reloaded.quant, reloaded.slices) == ("8bit", ("full", "x"))
    assert reloaded.extra == entry.extra


def test_renaming_a_key_and_adding_and_removing_entries(catalog_path: Path) -> None:
    catalog = Catalog.open([catalog_path])
    gguf = catalog.entry("qwen3-6b-gguf-q4-k-m")
    catalog.replace_entry(gguf.key, dataclasses.replace(gguf, key="qwen3-6b-gguf"))
    added = parse_entry(
        {
            **gguf.to_fields(),
            "key": "qwen3-6b-gguf-q8-0",
            "quant": "Q8_0",
            "output_name": "qwen3-6b-Q8_0.gguf",
            "hf_repo": "acme/qwen3-6b-Q8_0-GGUF",
        }
    )
    catalog.add_entry(added, catalog_path)
    catalog.remove_entry("qwen3-6b-mlx-4bit")
    catalog.save()

    reloaded = load_catalog([catalog_path])
    assert [e.key for e in reloaded.entries()] == ["qwen3-6b-gguf", "qwen3-6b-gguf-q8-0"]
    assert reloaded.entry("qwen3-6b-gguf-q8-0") == dataclasses.replace(added, source_file=None)
    assert "version: 3" in catalog_path.read_text(encoding="utf-8")


def test_save_refuses_a_catalog_with_errors_and_keeps_the_file(catalog_path: Path) -> None:
    catalog = Catalog.open([catalog_path])
    gguf = catalog.entry("qwen3-6b-gguf-q4-k-m")
    catalog.replace_entry(gguf.key, dataclasses.replace(gguf, hf_repo="acme/qwen3-6b-mlx-4bit"))
    with pytest.raises(CatalogError, match="duplicate hf_repo 'acme/qwen3-6b-mlx-4bit'"):
        catalog.save()
    assert catalog_path.read_text(encoding="utf-8") == HAND_WRITTEN


def test_a_write_that_fails_midway_leaves_the_original_intact(catalog_path: Path) -> None:
    catalog = Catalog.open([catalog_path])
    entry = catalog.entry("qwen3-6b-gguf-q4-k-m")
    unrepresentable = dataclasses.replace(entry, extra={"callback": object()})
    catalog.replace_entry(entry.key, unrepresentable)
    with pytest.raises(
        CatalogError,
        match=rf"could not save catalog file {re.escape(str(catalog_path))}.*unchanged",
    ):
        catalog.save()
    assert catalog_path.read_text(encoding="utf-8") == HAND_WRITTEN
    assert sorted(p.name for p in catalog_path.parent.iterdir()) == ["mine.yaml"]


def test_save_keeps_file_permissions(catalog_path: Path) -> None:
    catalog_path.chmod(0o640)
    catalog = Catalog.open([catalog_path])
    entry = catalog.entry("qwen3-6b-mlx-4bit")
    catalog.replace_entry(entry.key, dataclasses.replace(entry, tier="x"))
    catalog.save()
    assert catalog_path.stat().st_mode & 0o777 == 0o640


def test_save_through_a_symlink_updates_the_target(catalog_path: Path, tmp_path: Path) -> None:
    link = tmp_path / "link.yaml"
    link.symlink_to(catalog_path)
    catalog = Catalog.open([link])
    entry = catalog.entry("qwen3-6b-mlx-4bit")
    catalog.replace_entry(entry.key, dataclasses.replace(entry, tier="x"))
    catalog.save()
    assert link.is_symlink()
    assert "    tier: x\n" in catalog_path.read_text(encoding="utf-8")


def test_unmodified_catalog_writes_nothing(catalog_path: Path) -> None:
    before = catalog_path.stat().st_mtime_ns
    assert Catalog.open([catalog_path]).save() == []
    assert catalog_path.stat().st_mtime_ns == before


def test_entry_fields_round_trip_through_parse_entry(catalog_path: Path) -> None:
    for entry in load_catalog([catalog_path]).entries():
        assert parse_entry(entry.to_fields(), entry.source_file) == entry


def test_other_indentation_styles_are_kept(tmp_path: Path) -> None:
    text = (
        HAND_WRITTEN.replace("\n      - ", "\n  - ")
        .replace("\n  - key", "\n- key")
        .replace("\n    ", "\n  ")
    )
    assert "\n- key: qwen3-6b-mlx-4bit\n  source_model" in text
    assert "\n  slices:\n  - full\n" in text
    path = tmp_path / "compact.yaml"
    path.write_text(text, encoding="utf-8")
    catalog = Catalog.open([path])
    entry = catalog.entry("qwen3-6b-mlx-4bit")
    catalog.replace_entry(entry.key, dataclasses.replace(entry, tier="medium"))
    catalog.save()
    assert _changed_lines(text, path.read_text(encoding="utf-8")) == [
        ("  tier: smoke", "  tier: medium")
    ]


def test_first_entry_goes_into_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "new.yaml"
    path.write_text("# entries I add from the app\n", encoding="utf-8")
    catalog = Catalog.open([path])
    [problem] = catalog.problems()
    assert "has no `models:` list" in problem.message
    catalog.add_entry(parse_entry(entry_fields()), path)
    catalog.save()
    assert [e.key for e in load_catalog([path]).entries()] == ["qwen3-6b-mlx-4bit"]


def test_adding_to_a_file_whose_models_is_not_a_list_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "odd.yaml"
    path.write_text("models: {a: 1}\n", encoding="utf-8")
    catalog = Catalog.open([path])
    with pytest.raises(CatalogError, match=r"cannot add an entry to .*must be a list of entries"):
        catalog.add_entry(parse_entry(entry_fields()), path)
