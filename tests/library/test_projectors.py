"""A vision projector (``mmproj-*.gguf``) is listed with the GGUF models of its folder — never as a
model — and a deletion keeps it while another of those models stays and removes it with the last
one, in a models folder and in a real Hugging Face cache."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from huggingface_hub import hf_hub_download
from PySide6.QtCore import Qt

from app.engine.library.deletion import delete, plan_delete
from app.engine.library.inventory import (
    Inventory,
    LibraryModel,
    LibraryRoots,
    LibrarySources,
    build_inventory,
)
from app.ui.library.table import LibraryTableModel
from tests.localhub import LocalHub
from tests.store.isolation import IsolatedHome

PROJECTOR = "mmproj-Demo-f16.gguf"
PROJECTOR_BYTES = b"GGUF" + bytes(60_000)


@pytest.fixture
def roots(home: IsolatedHome, tmp_path: Path) -> LibraryRoots:
    return LibraryRoots(tmp_path / "models", home.hub_cache, tmp_path / "grafted")


@pytest.fixture
def vision_folder(roots: LibraryRoots, trunk_and_sidecar: tuple[Path, Path]) -> Path:
    folder = roots.models_dir / "demo-vision"
    folder.mkdir(parents=True)
    for name in ("Demo-Q8_0.gguf", "Demo-Q8_0-copy.gguf"):
        shutil.copy(trunk_and_sidecar[0], folder / name)
    (folder / PROJECTOR).write_bytes(PROJECTOR_BYTES)
    return folder


def inventory(roots: LibraryRoots) -> Inventory:
    return build_inventory(LibrarySources(roots, demo_dir=roots.models_dir / "no-demo"))


def model_named(roots: LibraryRoots, name: str) -> LibraryModel:
    return next(m for m in inventory(roots).models if m.path.name == name)


def test_the_projector_is_listed_with_each_model_of_its_folder(
    roots: LibraryRoots, vision_folder: Path
) -> None:
    models = inventory(roots).models
    assert sorted(m.path.name for m in models) == ["Demo-Q8_0-copy.gguf", "Demo-Q8_0.gguf"]
    for model in models:
        assert [(p.name, p.size_bytes) for p in model.projectors] == [(PROJECTOR, 60_004)]
    table = LibraryTableModel()
    table.set_models(list(models))
    tooltip = table.data(table.index(0, 0), Qt.ItemDataRole.ToolTipRole)
    assert "Vision: mmproj-Demo-f16.gguf (60.0 kB)" in tooltip.splitlines()
    assert table.data(table.index(0, 1)) == "GGUF + vision"


def test_the_projector_stays_with_the_model_left_and_goes_with_the_last(
    roots: LibraryRoots, vision_folder: Path
) -> None:
    first = plan_delete(model_named(roots, "Demo-Q8_0-copy.gguf"))
    assert first.paths == (vision_folder / "Demo-Q8_0-copy.gguf",)
    delete(first)
    assert (vision_folder / PROJECTOR).is_file()
    last = model_named(roots, "Demo-Q8_0.gguf")
    plan = plan_delete(last)
    assert plan.paths == (vision_folder / "Demo-Q8_0.gguf", vision_folder / PROJECTOR)
    assert plan.freed_bytes == last.size_bytes + len(PROJECTOR_BYTES)
    delete(plan)
    assert list(vision_folder.iterdir()) == []


def test_in_the_cache_the_last_model_takes_its_projector_with_its_repo(
    roots: LibraryRoots, local_hub: LocalHub, trunk_and_sidecar: tuple[Path, Path]
) -> None:
    repo = "visionfolk/Demo-GGUF"
    local_hub.seed_files(repo, {"Demo-Q8_0.gguf": trunk_and_sidecar[0], PROJECTOR: PROJECTOR_BYTES})
    for name in ("Demo-Q8_0.gguf", PROJECTOR):
        hf_hub_download(repo, name, cache_dir=roots.hub_cache)
    [model] = inventory(roots).models
    assert [p.name for p in model.projectors] == [PROJECTOR]
    plan = plan_delete(model)
    folder = roots.hub_cache / "models--visionfolk--Demo-GGUF"
    assert plan.paths == (folder,)  # not only the model file, leaving the projector behind
    delete(plan)
    assert not folder.exists()
