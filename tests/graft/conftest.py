"""Session fixtures: trunk-only demo bases (Q8_0 and Q4_0), the sidecars the real extractor makes
from the demo checkpoints, and the grafts the runtime tests load."""

from __future__ import annotations

from pathlib import Path

import llama_cpp
import pytest

from app.engine.graft import graft_mtp
from app.engine.mtp import LocalFolderSource, extract_mtp
from tests.graft.bases import (
    DEMO_FP8,
    DEMO_GGUF,
    DEMO_HF,
    requantise,
    write_head_only,
    write_trunk_only,
)


@pytest.fixture(scope="session")
def graft_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``trunk_q8``/``trunk_q4`` bases, ``head_file`` (the demo's head as a separate
    ``mtp-*.gguf``), ``sidecar_fp8``/``sidecar_hf`` sidecars, and ``grafted_q8``/``grafted_q4``
    (the FP8 release's sidecar grafted into each base)."""
    root = tmp_path_factory.mktemp("graft")
    files = {"trunk_q8": write_trunk_only(DEMO_GGUF, root / "trunk-q8_0.gguf")}
    files["head_file"] = write_head_only(DEMO_GGUF, root / "mtp-Demo-MTP-Q8_0.gguf")
    files["trunk_q4"] = requantise(
        files["trunk_q8"], root / "trunk-q4_0.gguf", llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0
    )
    for name, checkpoint in (("sidecar_fp8", DEMO_FP8), ("sidecar_hf", DEMO_HF)):
        files[name] = root / f"{name}.safetensors"
        extract_mtp(LocalFolderSource(checkpoint), files[name])
    for quant in ("q8", "q4"):
        out = root / f"grafted-{quant}.gguf"
        graft_mtp(files[f"trunk_{quant}"], files["sidecar_fp8"], out)
        files[f"grafted_{quant}"] = out
    return files
