"""A drafter is never a model of its own: the picker and the Models page list its target with it.

Both tiny Gemma 4 pairs are copied into a models folder as a user would keep them (the GGUFs with
the drafter beside the trunk or in ``MTP/``, the transformers folders side by side); the chat's
model discovery and the library's inventory list the two targets in each format, each paired with
its drafter, and never a drafter.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from app.engine.chat.discovery import ModelSources, discover_models
from app.engine.library.inventory import (
    DRAFTER_PAIRED,
    LibraryRoots,
    LibrarySources,
    build_inventory,
)
from tests.drafter.pairs import PAIRS


def _models_folder(tmp_path: Path) -> Path:
    models = tmp_path / "models"
    for pair in PAIRS.values():
        shutil.copytree(pair.folder, models / pair.folder.name)
    return models


def test_discovery_lists_targets_with_their_drafters_and_no_drafter(tmp_path: Path) -> None:
    models = _models_folder(tmp_path)
    found = discover_models(ModelSources((models,), demo_dir=tmp_path / "no-demo"))
    paired = {d.path.relative_to(models).as_posix(): d.drafter for d in found}
    assert paired == {
        "gemma4-tiny-centroid/gemma4-tiny-centroid-Q8_0.gguf": models
        / "gemma4-tiny-centroid/mtp-gemma4-tiny-centroid-Q8_0.gguf",
        "gemma4-tiny-centroid/hf/target": models / "gemma4-tiny-centroid/hf/assistant",
        "gemma4-tiny-dense/gemma4-tiny-dense-Q8_0.gguf": models
        / "gemma4-tiny-dense/MTP/gemma4-tiny-dense-assistant-Q8_0.gguf",
        "gemma4-tiny-dense/hf/target": models / "gemma4-tiny-dense/hf/assistant",
    }


def test_a_drafter_named_like_a_model_is_still_not_listed(tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    pair = PAIRS["dense"]
    shutil.copy(pair.target, models / "gemma-4-Tiny-it-Q8_0.gguf")
    shutil.copy(pair.drafter, models / "gemma-4-Tiny-it-Q4_K_M.gguf")  # a trunk's name
    found = discover_models(ModelSources((models,), demo_dir=tmp_path / "no-demo"))
    assert [(d.path.name, d.drafter.name if d.drafter else None) for d in found] == [
        ("gemma-4-Tiny-it-Q8_0.gguf", "gemma-4-Tiny-it-Q4_K_M.gguf")
    ]


def test_the_models_page_shows_the_drafter_as_the_targets_mtp(tmp_path: Path) -> None:
    models = _models_folder(tmp_path)
    roots = LibraryRoots(models, tmp_path / "hub", tmp_path / "grafted")
    inventory = build_inventory(LibrarySources(roots, demo_dir=tmp_path / "no-demo"))
    assert len(inventory.models) == 4
    for model in inventory.models:
        assert model.mtp.kind == DRAFTER_PAIRED
        assert model.mtp.label == f"Drafter paired: {model.description.drafter}"
