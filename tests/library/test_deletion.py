"""Deleting a model frees exactly what the plan said, removes only that model, and refuses the
demo, links, and anything outside the library's folders."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from huggingface_hub import scan_cache_dir

from app.engine.errors import LibraryError
from app.engine.library.deletion import delete, plan_delete
from app.engine.library.inventory import MODELS_FOLDER, LibraryModel, build_inventory
from tests.graft.bases import DEMO_GGUF
from tests.library.layout import GGUF_REPO, HF_REPO, DiskLayout, stored_bytes


def _model(disk: DiskLayout, path: Path) -> LibraryModel:
    return next(m for m in build_inventory(disk.sources()).models if m.path == path)


@pytest.mark.slow
def test_deleting_one_quant_keeps_its_sibling_and_the_blob_two_revisions_share(
    disk: DiskLayout,
) -> None:
    repo = disk.repo_folder(GGUF_REPO)
    trunk = _model(disk, disk.cached_trunk)
    plan = plan_delete(trunk)
    assert plan.paths == (disk.cached_trunk,)
    assert plan.freed_bytes == trunk.size_bytes == disk.folder_trunk.stat().st_size
    before = stored_bytes(repo)

    assert delete(plan) == plan.freed_bytes
    assert before - stored_bytes(repo) == plan.freed_bytes
    assert not os.path.lexists(disk.cached_trunk)
    first_q8 = repo / "snapshots" / disk.first_revision / disk.cached_q8.name
    for copy in (first_q8, disk.cached_q8):  # the blob both revisions link survives
        assert copy.read_bytes()[:4] == b"GGUF" and copy.stat().st_size == DEMO_GGUF.stat().st_size
    assert (repo / "snapshots" / disk.second_revision / "README.md").read_text() == "two, longer\n"
    paths = [m.path for m in build_inventory(disk.sources()).models]
    assert disk.cached_trunk not in paths and disk.cached_q8 in paths


@pytest.mark.slow
def test_deleting_the_last_model_of_a_repo_removes_every_cached_revision(disk: DiskLayout) -> None:
    repo = disk.repo_folder(GGUF_REPO)
    delete(plan_delete(_model(disk, disk.cached_trunk)))
    q8 = _model(disk, disk.cached_q8)
    plan = plan_delete(q8)
    assert plan.paths == (repo,)
    # Its blob once (linked from two revisions), the two READMEs and refs/main (a commit id).
    assert plan.freed_bytes == stored_bytes(repo) == DEMO_GGUF.stat().st_size + 4 + 12 + 40

    assert delete(plan) == plan.freed_bytes
    assert not repo.exists()
    assert GGUF_REPO not in {r.repo_id for r in scan_cache_dir(disk.hub_cache).repos}
    assert disk.cached_q8 not in [m.path for m in build_inventory(disk.sources()).models]


@pytest.mark.slow
def test_deleting_a_cached_checkpoint_frees_its_whole_snapshot(disk: DiskLayout) -> None:
    repo = disk.repo_folder(HF_REPO)
    model = _model(disk, disk.cached_hf)
    plan = plan_delete(model)
    assert plan.paths == (repo,)
    # The snapshot's files, and the cache's own bookkeeping in the repo folder (refs).
    assert plan.freed_bytes == stored_bytes(repo) > model.size_bytes
    assert plan.freed_bytes - model.size_bytes < 1000
    delete(plan)
    assert not repo.exists()
    assert disk.repo_folder(GGUF_REPO).is_dir()  # other repos stay


def test_a_model_in_the_models_folder_is_deleted_and_its_sidecar_stays(disk: DiskLayout) -> None:
    model = _model(disk, disk.folder_trunk)
    plan = plan_delete(model)
    assert (plan.paths, plan.freed_bytes) == ((disk.folder_trunk,), model.size_bytes)
    delete(plan)
    assert not disk.folder_trunk.exists() and disk.folder_sidecar.is_file()


def test_an_opened_model_folder_the_user_chose_is_deleted(disk: DiskLayout) -> None:
    model = _model(disk, disk.opened_mlx)
    plan = plan_delete(model)
    size = sum(f.stat().st_size for f in disk.opened_mlx.rglob("*") if f.is_file())
    assert (plan.paths, plan.freed_bytes) == ((disk.opened_mlx,), size)
    delete(plan)
    assert not disk.opened_mlx.exists() and disk.opened_gguf.is_file()


def test_the_bundled_demo_cannot_be_deleted(disk: DiskLayout) -> None:
    demo = _model(disk, DEMO_GGUF)
    assert not demo.deletable
    with pytest.raises(LibraryError, match="bundled demo model and cannot be deleted"):
        plan_delete(demo)
    assert DEMO_GGUF.is_file()


def test_a_model_reached_through_a_link_out_of_the_models_folder_is_refused(
    disk: DiskLayout, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    target = Path(shutil.copy(disk.opened_gguf, outside / "elsewhere.gguf"))
    single = Path(shutil.copy(disk.opened_gguf, tmp_path / "single-target.gguf"))
    (disk.models_dir / "linked").symlink_to(outside)
    (disk.models_dir / "single.gguf").symlink_to(single)
    models = {m.path: m for m in build_inventory(disk.sources()).models}
    through_folder = models[disk.models_dir / "linked" / "elsewhere.gguf"]
    assert through_folder.location.kind == MODELS_FOLDER
    with pytest.raises(LibraryError, match=re.escape(f"is not inside {disk.models_dir}")):
        plan_delete(through_folder)
    with pytest.raises(LibraryError, match=r"is a link to .*single-target\.gguf"):
        plan_delete(models[disk.models_dir / "single.gguf"])
    assert target.is_file() and single.is_file()


def test_a_plan_for_a_repo_another_tool_removed_or_damaged_says_what_to_do(
    disk: DiskLayout,
) -> None:
    model = _model(disk, disk.cached_hf)
    blob = (disk.cached_hf / "config.json").resolve()
    blob.unlink()  # a broken link: huggingface_hub's scan calls the repo damaged
    with pytest.raises(LibraryError, match=r"it is damaged \(Blob missing .*remove that folder"):
        plan_delete(model)
    shutil.rmtree(disk.repo_folder(HF_REPO))
    with pytest.raises(
        LibraryError,
        match=r"cannot be read from the Hugging Face cache .*deleted by another tool.*refresh",
    ):
        plan_delete(model)
