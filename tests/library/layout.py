"""A user's disk for the library tests, made with the real tools that make one.

- Hugging Face cache (downloaded from the local hub with ``hf_hub_download`` /
  ``snapshot_download``, so blobs, symlinks and refs are exactly the client's):
  ``acme/demo-GGUF`` — commit 1 holds ``demo-mtp-Q8_0.gguf`` (the demo, head inside) and a
  README; commit 2 adds ``demo-trunk-Q8_0.gguf`` (no head) and changes the README. Both
  revisions are downloaded, so the Q8_0 blob is linked from two snapshots.
  ``acme/demo-hf`` — the demo's BF16 Hugging Face checkpoint (head inside).
  ``acme/demo-mtp`` is on the hub only: the sidecar the catalog names for ``acme/demo-GGUF``.
- Models folder: ``trunk/demo-trunk.gguf`` with ``trunk/mtp.safetensors`` beside it.
- Grafted copies: the trunk with the sidecar's head grafted in by the real graft.
- Opened by hand (remembered in the chat history): an MLX 4-bit conversion and a GGUF, both
  outside every root.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import hf_hub_download, snapshot_download

from app.engine.chat.history import HISTORY_FILE_NAME, HistoryStore
from app.engine.graft import graft_mtp
from app.engine.library.inventory import LibraryRoots, LibrarySources
from app.engine.settings import app_dirs
from tests.graft.bases import DEMO_GGUF, DEMO_HF
from tests.localhub import LocalHub
from tests.store.isolation import IsolatedHome

GGUF_REPO = "acme/demo-GGUF"
HF_REPO = "acme/demo-hf"
SIDECAR_REPO = "acme/demo-mtp"
CATALOG_SIDECARS = {GGUF_REPO: SIDECAR_REPO}


@dataclass(frozen=True)
class DiskLayout:
    hub_cache: Path
    models_dir: Path
    grafted_dir: Path
    first_revision: str
    second_revision: str
    cached_q8: Path
    cached_trunk: Path
    cached_hf: Path
    folder_trunk: Path
    folder_sidecar: Path
    grafted: Path
    opened_mlx: Path
    opened_gguf: Path

    @property
    def roots(self) -> LibraryRoots:
        return LibraryRoots(self.models_dir, self.hub_cache, self.grafted_dir)

    def sources(self, opened: tuple[Path, ...] | None = None) -> LibrarySources:
        return LibrarySources(
            self.roots,
            opened=(self.opened_mlx, self.opened_gguf) if opened is None else opened,
            catalog_sidecars=CATALOG_SIDECARS,
        )

    def repo_folder(self, repo_id: str) -> Path:
        return self.hub_cache / f"models--{repo_id.replace('/', '--')}"


def lay_out(
    hub: LocalHub,
    home: IsolatedHome,
    tmp_path: Path,
    trunk: Path,
    sidecar: Path,
    mlx_folder: Path,
) -> DiskLayout:
    cache = home.hub_cache
    first = hub.seed_files(GGUF_REPO, {"demo-mtp-Q8_0.gguf": DEMO_GGUF, "README.md": b"one\n"})
    second = hub.seed_files(
        GGUF_REPO, {"demo-trunk-Q8_0.gguf": trunk, "README.md": b"two, longer\n"}
    )
    for name in ("demo-mtp-Q8_0.gguf", "README.md"):
        hf_hub_download(GGUF_REPO, name, revision=first, cache_dir=cache)
    for name in ("demo-mtp-Q8_0.gguf", "demo-trunk-Q8_0.gguf", "README.md"):
        hf_hub_download(GGUF_REPO, name, revision="main", cache_dir=cache)  # = second
    hub.seed_folder(HF_REPO, DEMO_HF)
    cached_hf = Path(snapshot_download(HF_REPO, cache_dir=cache))
    hub.seed_files(SIDECAR_REPO, {"mtp.safetensors": sidecar})

    models = tmp_path / "models"
    (models / "trunk").mkdir(parents=True)
    folder_trunk = Path(shutil.copy(trunk, models / "trunk" / "demo-trunk.gguf"))
    folder_sidecar = Path(shutil.copy(sidecar, models / "trunk" / "mtp.safetensors"))
    grafted_dir = app_dirs().grafted_models
    grafted_dir.mkdir(parents=True)
    grafted = grafted_dir / "demo-trunk-mtp.gguf"
    graft_mtp(trunk, sidecar, grafted)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    opened_mlx = Path(shutil.copytree(mlx_folder, elsewhere / mlx_folder.name))
    opened_gguf = Path(shutil.copy(trunk, elsewhere / "my-trunk.gguf"))
    remember_opened(opened_mlx, opened_gguf)

    snapshots = cache / f"models--{GGUF_REPO.replace('/', '--')}" / "snapshots"
    return DiskLayout(
        hub_cache=cache,
        models_dir=models,
        grafted_dir=grafted_dir,
        first_revision=first,
        second_revision=second,
        cached_q8=snapshots / second / "demo-mtp-Q8_0.gguf",
        cached_trunk=snapshots / second / "demo-trunk-Q8_0.gguf",
        cached_hf=cached_hf,
        folder_trunk=folder_trunk,
        folder_sidecar=folder_sidecar,
        grafted=grafted,
        opened_mlx=opened_mlx,
        opened_gguf=opened_gguf,
    )


def remember_opened(*paths: Path) -> None:
    """Open the files the way the chat remembers them: in its history database."""
    store = HistoryStore(app_dirs().data / HISTORY_FILE_NAME)
    try:
        for path in paths:
            store.remember_model(path)
    finally:
        store.close()


def files_bytes(folder: Path) -> int:
    """Bytes of every file in ``folder`` (links followed: what a download put there)."""
    return sum(file.stat().st_size for file in folder.rglob("*") if file.is_file())


def stored_bytes(folder: Path) -> int:
    """Bytes of the regular files under ``folder`` (a cache's blobs; its symlinks are free)."""
    if not folder.exists():
        return 0
    return sum(p.lstat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
