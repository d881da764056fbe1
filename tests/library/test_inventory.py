"""The library lists every model on disk once, with the format, quantisation, real size on disk,
MTP status and place a user would check in a file manager or with ``hf cache scan``."""

from __future__ import annotations

from pathlib import Path

from huggingface_hub import hf_hub_download, scan_cache_dir

from app.engine.library.inventory import (
    BUNDLED,
    GRAFTED,
    HEAD,
    HF_CACHE,
    MODELS_FOLDER,
    NO_MTP,
    OPENED_FILE,
    SIDECAR_ON_HUB,
    SIDECAR_PAIRED,
    LibraryModel,
    build_inventory,
)
from app.engine.runtime.core.demo_model import DEMO_VISION_MODEL
from tests.graft.bases import DEMO_GGUF, DEMO_HF
from tests.library.layout import GGUF_REPO, HF_REPO, SIDECAR_REPO, DiskLayout, files_bytes


def _by_path(models: tuple[LibraryModel, ...]) -> dict[Path, LibraryModel]:
    return {model.path: model for model in models}


def test_every_model_on_disk_is_listed_once_with_its_place(disk: DiskLayout) -> None:
    inventory = build_inventory(disk.sources())
    paths = [model.path for model in inventory.models]
    assert len(paths) == len(set(paths)) == 9
    models = _by_path(inventory.models)
    assert [model.location.kind for model in inventory.models[:2]] == [BUNDLED, BUNDLED]
    assert models[DEMO_GGUF].deletable is False
    assert models[DEMO_VISION_MODEL].deletable is False  # the vision demo ships with the app
    q8 = models[disk.cached_q8]
    assert q8.location.kind == HF_CACHE
    assert (q8.location.repo_id, q8.location.revision) == (GGUF_REPO, disk.second_revision)
    assert q8.location.refs == ("main",)
    assert q8.name == f"{GGUF_REPO} · demo-mtp-Q8_0.gguf"
    assert q8.location.label == f"Hugging Face cache (main, {disk.second_revision[:7]})"
    assert q8.location.detail == (
        f"{GGUF_REPO} at revision {disk.second_revision} in {disk.hub_cache}"
    )
    assert models[disk.cached_hf].name == HF_REPO
    assert models[disk.cached_hf].location.in_snapshot == ""
    assert models[disk.folder_trunk].location.kind == MODELS_FOLDER
    assert models[disk.folder_trunk].location.root == disk.models_dir
    assert models[disk.grafted].location.kind == GRAFTED
    assert models[disk.opened_mlx].location.kind == OPENED_FILE
    assert models[disk.opened_gguf].location.kind == OPENED_FILE
    assert all(model.deletable for model in inventory.models[2:])
    # The sidecar beside the trunk and the sidecar repo are not models of their own.
    assert disk.folder_sidecar not in models
    assert inventory.roots == (disk.models_dir, disk.hub_cache, disk.grafted_dir)


def test_format_and_quantisation_come_from_the_files(disk: DiskLayout) -> None:
    models = _by_path(build_inventory(disk.sources()).models)
    columns = {path: (m.format, m.quantisation) for path, m in models.items()}
    assert columns[DEMO_GGUF] == ("GGUF", "Q8_0")
    assert columns[disk.cached_trunk] == ("GGUF", "Q8_0")
    assert columns[disk.grafted] == ("GGUF", "Q8_0")
    assert columns[disk.cached_hf] == ("Safetensors (Hugging Face)", "BF16")
    assert columns[disk.opened_mlx] == ("MLX", "4-bit (group 64)")


def test_sizes_are_the_bytes_on_disk_with_shared_blobs_counted_once(disk: DiskLayout) -> None:
    models = _by_path(build_inventory(disk.sources()).models)
    # Two revisions link the same Q8_0 blob: it takes its size once, and the README is not
    # part of the model.
    first_copy = disk.cached_q8.parents[1] / disk.first_revision / disk.cached_q8.name
    assert first_copy.resolve() == disk.cached_q8.resolve()
    assert models[disk.cached_q8].size_bytes == DEMO_GGUF.stat().st_size
    assert models[disk.cached_trunk].size_bytes == disk.folder_trunk.stat().st_size
    # A Hugging Face folder is its whole snapshot (config, tokenizer, weights, .gitattributes).
    assert models[disk.cached_hf].size_bytes == files_bytes(disk.cached_hf)
    assert models[disk.cached_hf].size_bytes >= files_bytes(DEMO_HF)
    assert models[disk.opened_mlx].size_bytes == files_bytes(disk.opened_mlx)
    # The sidecar beside a GGUF is not the GGUF's size.
    assert models[disk.folder_trunk].size_bytes == disk.folder_trunk.stat().st_size
    # The cache's own scan agrees with the figures for the whole repo.
    [hf_repo] = [r for r in scan_cache_dir(disk.hub_cache).repos if r.repo_id == HF_REPO]
    assert models[disk.cached_hf].size_bytes == hf_repo.size_on_disk


def test_mtp_status_says_head_paired_sidecar_catalog_sidecar_or_none(disk: DiskLayout) -> None:
    models = _by_path(build_inventory(disk.sources()).models)
    status = {path: model.mtp for path, model in models.items()}
    assert (status[DEMO_GGUF].kind, status[DEMO_GGUF].blocks) == (HEAD, 1)
    assert status[DEMO_GGUF].label == "Head inside (1 block)"
    assert status[disk.cached_hf].kind == HEAD
    assert status[disk.grafted].kind == HEAD
    assert status[disk.folder_trunk].kind == SIDECAR_PAIRED
    assert status[disk.folder_trunk].sidecar == disk.folder_sidecar
    assert models[disk.folder_trunk].can_graft
    assert (status[disk.cached_trunk].kind, status[disk.cached_trunk].sidecar_repo) == (
        SIDECAR_ON_HUB,
        SIDECAR_REPO,
    )
    assert status[disk.cached_trunk].label == f"Sidecar not downloaded: {SIDECAR_REPO}"
    assert not models[disk.cached_trunk].can_graft
    assert status[disk.opened_gguf].kind == NO_MTP
    assert status[disk.opened_mlx].kind == NO_MTP  # mlx_lm.convert drops the MTP tensors


def test_a_downloaded_sidecar_is_paired_after_a_rescan(disk: DiskLayout) -> None:
    sidecar = Path(hf_hub_download(SIDECAR_REPO, "mtp.safetensors", cache_dir=disk.hub_cache))
    trunk = _by_path(build_inventory(disk.sources()).models)[disk.cached_trunk]
    assert (trunk.mtp.kind, trunk.mtp.sidecar) == (SIDECAR_PAIRED, sidecar)
    assert trunk.can_graft
