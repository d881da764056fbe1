"""Library tests: isolated folders, a trunk-only GGUF with its sidecar, and a disk laid out as a
user's would be — models downloaded from the local hub into a real Hugging Face cache (two
revisions sharing a blob), a models folder, a grafted copy, and files opened by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlx_lm import convert

from app.engine.mtp import LocalFolderSource, extract_mtp
from tests.graft.bases import DEMO_FP8, DEMO_GGUF, DEMO_HF, write_trunk_only
from tests.library.layout import DiskLayout, lay_out
from tests.localhub import LocalHub
from tests.store.isolation import IsolatedHome


@pytest.fixture(scope="session")
def trunk_and_sidecar(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The demo GGUF without its MTP block, and the sidecar extracted from the FP8 release."""
    folder = tmp_path_factory.mktemp("library-sources")
    trunk = write_trunk_only(DEMO_GGUF, folder / "demo-trunk.gguf")
    sidecar = folder / "mtp.safetensors"
    extract_mtp(LocalFolderSource(DEMO_FP8), sidecar)
    return trunk, sidecar


@pytest.fixture(scope="session")
def mlx_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo checkpoint converted to 4-bit MLX by mlx_lm itself."""
    folder = tmp_path_factory.mktemp("library-mlx") / "demo-mtp-mlx-4bit"
    convert(str(DEMO_HF), mlx_path=str(folder), quantize=True, q_bits=4)
    return folder


@pytest.fixture
def disk(
    local_hub: LocalHub,
    home: IsolatedHome,
    tmp_path: Path,
    trunk_and_sidecar: tuple[Path, Path],
    mlx_folder: Path,
) -> DiskLayout:
    trunk, sidecar = trunk_and_sidecar
    return lay_out(local_hub, home, tmp_path, trunk, sidecar, mlx_folder)
