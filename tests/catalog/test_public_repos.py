"""``public_repos``: other publishers' conversions listed beside an entry's own output repo —
checked by ``catalog validate``, kept through a save, and used by search to find the sidecar."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main
from app.engine.catalog import Catalog, load_catalog
from app.engine.hub.search import catalog_sidecars
from tests.catalog.helpers import entry, write_catalog

PUBLIC = ["unsloth/Qwen3-6B-GGUF", "bartowski/Qwen_Qwen3-6B-GGUF"]


def test_public_repos_are_read_kept_and_map_to_the_sidecar(tmp_path: Path) -> None:
    path = write_catalog(tmp_path / "c.yaml", entry(public_repos=PUBLIC))
    [loaded] = load_catalog([path]).entries()
    assert loaded.public_repos == tuple(PUBLIC)
    assert loaded.to_fields()["public_repos"] == PUBLIC
    sidecars = catalog_sidecars([loaded])
    assert sidecars["unsloth/Qwen3-6B-GGUF"] == sidecars["Qwen/Qwen3-6B"] == "acme/qwen3-6b-mtp"
    [plain] = load_catalog([write_catalog(tmp_path / "p.yaml", entry())]).entries()
    assert "public_repos" not in plain.to_fields()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("unsloth/Qwen3-6B-GGUF", "public_repos must be a list of Hub repo ids"),
        (["not a repo"], "public_repos lists 'not a repo', which is not a Hub repo id"),
        (["acme/qwen3-6b-mlx-4bit"], "the entry's own hf_repo"),
        ([PUBLIC[0], PUBLIC[0]], f"public_repos lists {PUBLIC[0]} more than once"),
    ],
)
def test_validate_names_what_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: object, message: str
) -> None:
    path = write_catalog(tmp_path / "c.yaml", entry(public_repos=value))
    [problem] = Catalog.open([path]).problems()
    assert problem.field == "public_repos" and message in problem.message
    assert main(["catalog", "validate", "--catalog", str(path)]) == 2
    assert message in capsys.readouterr().out


def test_the_default_catalog_lists_public_conversions() -> None:
    listed = [e for e in load_catalog().entries() if e.public_repos]
    assert len(listed) >= 5
    formats = {("gguf" if e.output_name.endswith(".gguf") else "mlx") for e in listed}
    assert formats == {"gguf", "mlx"}
