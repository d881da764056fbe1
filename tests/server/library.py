"""A small library on disk for the library-server tests, laid out as a user's would be.

Under one temporary root: a models folder with the vision demo (its projector beside it), the
tiny dense Gemma 4 target with its drafter in ``MTP/`` (the drafter is never a model of its own)
and two files that share a name in different folders; a Hugging Face cache holding the demo GGUF
as ``acme/Demo-GGUF`` (blob, snapshot link, ``refs/main``, as huggingface_hub writes it); and the
app's own folders. The bundled demos join them as ``demo-mtp`` and ``demo-vision-Q8_0``. Nothing
is read from the user's folders: the server gets this root's cache and app folders through its
environment.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from app.engine.runtime.core.demo_model import DEMO_VISION_DIR, demo_model_path
from tests.drafter.pairs import PAIRS
from tests.server.server_process import library_env

REVISION = "0123456789abcdef0123456789abcdef01234567"
CACHED_ID = "acme/Demo-GGUF/Demo-Q8_0.gguf"
VISION_ID = "vision/demo-vision-Q8_0.gguf"
DENSE_ID = "dense/gemma4-tiny-dense-Q8_0.gguf"
TWIN_IDS = ("twins/a/twin.gguf", "twins/b/twin.gguf")
BUNDLED_IDS = ("demo-mtp", "demo-vision-Q8_0")
ALL_IDS = {*BUNDLED_IDS, CACHED_ID, VISION_ID, DENSE_ID, *TWIN_IDS}


@dataclass(frozen=True)
class Library:
    root: Path

    @property
    def models_dir(self) -> Path:
        return self.root / "models"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def env(self) -> dict[str, str]:
        return library_env(self.root)

    def serve_args(self, *extra: str) -> tuple[str, ...]:
        return ("--models-dir", str(self.models_dir), *extra)


def lay_out_library(root: Path) -> Library:
    library = Library(root)
    models = library.models_dir
    (models / "vision").mkdir(parents=True)
    for file in DEMO_VISION_DIR.glob("*.gguf"):
        shutil.copy2(file, models / "vision" / file.name)
    dense = PAIRS["dense"]
    (models / "dense" / "MTP").mkdir(parents=True)
    shutil.copy2(dense.target, models / "dense" / dense.target.name)
    shutil.copy2(dense.drafter, models / "dense" / "MTP" / dense.drafter.name)
    for twin in TWIN_IDS:
        (models / twin).parent.mkdir(parents=True)
        shutil.copy2(DEMO_VISION_DIR / "demo-vision-Q8_0.gguf", models / twin)
    _cache_repo(root / "hf-home" / "hub", "acme/Demo-GGUF", "Demo-Q8_0.gguf", demo_model_path())
    return library


def _cache_repo(hub: Path, repo_id: str, name: str, source: Path) -> None:
    folder = hub / f"models--{repo_id.replace('/', '--')}"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    (folder / "blobs").mkdir(parents=True)
    shutil.copy2(source, folder / "blobs" / digest)
    snapshot = folder / "snapshots" / REVISION
    snapshot.mkdir(parents=True)
    (snapshot / name).symlink_to(Path("..") / ".." / "blobs" / digest)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(REVISION)
