"""Issue 34: a head file whose tensors are stored in a type the MTP head cannot use is refused
before anything is written — llama.cpp crashed (SIGSEGV) on a head matrix retyped to I64, and a
chat died on one retyped to IQ2_XXS or MXFP4 or on a norm stored as a matrix."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.errors import GraftError
from app.engine.graft.head_file import graft_head_file
from tests.graft.bases import DEMO_GGUF, HEAD_BLOCK, write_retyped_head

EH_PROJ = f"blk.{HEAD_BLOCK}.nextn.eh_proj.weight"
ENORM = f"blk.{HEAD_BLOCK}.nextn.enorm.weight"


@pytest.mark.parametrize(
    ("type_name", "tensor", "words"),
    [
        ("I64", EH_PROJ, "is stored as I64"),
        ("I8", EH_PROJ, "is stored as I8"),
        ("IQ2_XXS", EH_PROJ, "is stored as IQ2_XXS"),
        ("MXFP4", EH_PROJ, "is stored as MXFP4"),
        ("F16", ENORM, "is stored as F16 [256, 1]"),
    ],
)
@pytest.mark.slow
def test_a_head_tensor_of_an_unusable_type_is_refused(
    graft_files: dict[str, Path], tmp_path: Path, type_name: str, tensor: str, words: str
) -> None:
    head = write_retyped_head(DEMO_GGUF, tmp_path / f"mtp-{type_name}.gguf", type_name, tensor)
    out = tmp_path / "grafted.gguf"
    with pytest.raises(GraftError, match="which the MTP head cannot use") as caught:
        graft_head_file(graft_files["trunk_q8"], head, out)
    assert tensor in str(caught.value) and words in str(caught.value)
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == [head.name]


def test_a_head_in_another_usual_type_is_still_grafted(
    graft_files: dict[str, Path], tmp_path: Path
) -> None:
    head = write_retyped_head(DEMO_GGUF, tmp_path / "mtp-f16.gguf", "F16", EH_PROJ)
    result = graft_head_file(graft_files["trunk_q8"], head, tmp_path / "grafted.gguf")
    assert result.out_path.is_file() and result.head_blocks == 1
