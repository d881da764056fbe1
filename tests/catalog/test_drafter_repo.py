"""``drafter_repo``: a separate drafter model (Gemma 4's ``-it-assistant``) named by an entry —
checked by ``catalog validate``, kept through a save, and used by search and get to find it."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main
from app.engine.catalog import Catalog, load_catalog
from app.engine.hub.drafter_lookup import catalog_drafters
from tests.catalog.helpers import entry, write_catalog

GEMMA = {
    "source_model": "google/gemma-4-E2B-it",
    "mtp_source_repo": None,
    "mtp_sidecar_repo": None,
    "public_repos": ["unsloth/gemma-4-E2B-it-GGUF"],
}


def test_a_drafter_repo_is_read_kept_and_maps_every_repo_of_the_entry(tmp_path: Path) -> None:
    path = write_catalog(
        tmp_path / "c.yaml",
        entry("gemma-4-e2b-it-mlx-4bit", **GEMMA, drafter_repo="google/gemma-4-E2B-it-assistant"),
    )
    [loaded] = load_catalog([path]).entries()
    assert loaded.drafter_repo == "google/gemma-4-E2B-it-assistant"
    assert loaded.to_fields()["drafter_repo"] == "google/gemma-4-E2B-it-assistant"
    drafters = catalog_drafters([loaded])
    assert set(drafters) == {
        "google/gemma-4-E2B-it",
        "acme/gemma-4-e2b-it-mlx-4bit",
        "unsloth/gemma-4-E2B-it-GGUF",
    }
    assert set(drafters.values()) == {"google/gemma-4-E2B-it-assistant"}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({**GEMMA, "drafter_repo": "not a repo"}, "drafter_repo 'not a repo' is not a Hub repo id"),
        (
            {**GEMMA, "drafter_repo": "google/gemma-4-E2B-it"},
            "drafter_repo 'google/gemma-4-E2B-it' is the same repo as source_model",
        ),
        (
            {"drafter_repo": "google/gemma-4-E2B-it-assistant"},
            "drafter_repo and mtp_sidecar_repo are both set",
        ),
    ],
)
def test_validate_names_what_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], overrides: dict[str, object], message: str
) -> None:
    path = write_catalog(tmp_path / "c.yaml", entry(**overrides))
    [problem] = Catalog.open([path]).problems()
    assert problem.field == "drafter_repo" and message in problem.message
    assert main(["catalog", "validate", "--catalog", str(path)]) == 2
    assert message in capsys.readouterr().out


def test_the_default_catalog_has_every_gemma_4_size_with_its_assistant() -> None:
    gemma = [e for e in load_catalog().entries() if e.source_model.startswith("google/gemma-4-")]
    sizes = {e.source_model.removeprefix("google/gemma-4-").removesuffix("-it") for e in gemma}
    assert sizes == {"E2B", "E4B", "12B", "26B-A4B", "31B"}
    for e in gemma:
        assert e.drafter_repo is not None and not e.has_sidecar
        format_suffix = "-GGUF" if e.output_name.endswith(".gguf") else ""
        assert e.drafter_repo.endswith(f"{e.source_model.split('/')[1]}-assistant{format_suffix}")
