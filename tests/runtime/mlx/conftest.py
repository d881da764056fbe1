"""The demo model as a user would run it on MLX, built once per session.

The demo's Hugging Face checkpoint is converted with ``mlx_lm.convert`` to 4-bit and 8-bit
(which strips its ``mtp.*`` tensors), and its sidecar is extracted from the FP8 "original
release" with the project's extractor — the publish → download → chat path in miniature.
In-process backends keep the exactness tests fast; worker behaviour is tested through
:class:`RuntimeClient`.

mlx's CPU build decodes the demo's 4-bit conversion about five times slower than its BF16 folder
(measured: 65 against 13 ms of CPU a token), so tests about the backend's own states — prefix
reuse, states captured in verify, constraints, the sampling law — run on :func:`bf16`, the
unquantised folder with the MTP head in its own tensors; tests about what a user runs (the 4-bit
and 8-bit conversions with the extracted sidecar) keep those.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from mlx_lm import convert

from app.engine.mtp.extract import extract_mtp
from app.engine.mtp.source import LocalFolderSource
from app.engine.runtime.backends.mlx.backend import MlxBackend
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.demo_model import MODELS_DIR

DEMO_HF = MODELS_DIR / "demo-mtp-hf"
DEMO_FP8 = MODELS_DIR / "demo-mtp-fp8"
SETTINGS = LoadSettings(context_length=1024)


@dataclass(frozen=True)
class MlxDemo:
    four_bit: Path
    eight_bit: Path
    sidecar: Path
    """Extracted from the FP8 release, as a publisher of an FP8-released model makes it."""


@pytest.fixture(scope="session")
def mlx_demo(tmp_path_factory: pytest.TempPathFactory) -> MlxDemo:
    root = tmp_path_factory.mktemp("mlx-demo")
    folders = {}
    for bits in (4, 8):
        folder = root / f"demo-mtp-mlx-{bits}bit"
        convert(str(DEMO_HF), mlx_path=str(folder), quantize=True, q_bits=bits, q_group_size=64)
        folders[bits] = folder
    sidecar_dir = root / "demo-mtp-sidecar"
    sidecar_dir.mkdir()
    sidecar = extract_mtp(LocalFolderSource(DEMO_FP8), sidecar_dir / "mtp.safetensors").out_path
    return MlxDemo(folders[4], folders[8], sidecar)


@pytest.fixture(scope="session")
def bf16() -> Iterator[MlxBackend]:
    backend = MlxBackend(DEMO_HF, SETTINGS)
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def four_bit(mlx_demo: MlxDemo) -> Iterator[MlxBackend]:
    backend = MlxBackend(mlx_demo.four_bit, SETTINGS, mlx_demo.sidecar)
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def eight_bit(mlx_demo: MlxDemo) -> Iterator[MlxBackend]:
    backend = MlxBackend(mlx_demo.eight_bit, SETTINGS, mlx_demo.sidecar)
    yield backend
    backend.close()
