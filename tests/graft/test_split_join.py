"""A split GGUF is joined into one file that llama.cpp loads as it loads the split one, and the
joined file takes the graft; missing or inconsistent parts are refused with the reason."""

from __future__ import annotations

from pathlib import Path

import llama_cpp
import numpy as np
import pytest
from gguf import GGUFReader

from app.engine.errors import GraftError
from app.engine.gguf_header import read_gguf_header
from app.engine.graft import graft_mtp
from app.engine.graft.split import join_split_gguf, joined_name, split_parts
from app.engine.runtime.backends.llama_cpp import log as llama_cpp_log
from app.engine.runtime.backends.llama_cpp.cpu_backends import load_installed
from tests.graft.splits import write_split


@pytest.fixture(scope="module")
def split_trunk(graft_files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("split")
    parts = write_split(graft_files["trunk_q8"], folder / "Demo-Q8_0.gguf", tensors_per_part=40)
    assert len(parts) == 3
    return parts[0]


def prompt_logits(path: Path) -> np.ndarray:
    """The logits llama.cpp computes at every position of a short prompt."""
    llama_cpp_log.install()
    load_installed()  # a portable llama.cpp's CPU variant, as the app loads it
    model = llama_cpp.Llama(str(path), n_ctx=64, n_threads=1, verbose=False, logits_all=True)
    model.eval(model.tokenize(b"The capital of France is"))
    logits = np.array(model.scores[: model.n_tokens])
    model.close()
    return logits


def test_the_joined_file_is_the_split_model_in_one_piece(
    split_trunk: Path, graft_files: dict[str, Path], tmp_path: Path
) -> None:
    assert joined_name(split_trunk) == "Demo-Q8_0.gguf"
    joined = join_split_gguf(split_trunk, tmp_path / "joined.gguf")
    original = GGUFReader(graft_files["trunk_q8"])
    result = GGUFReader(joined)
    assert [t.name for t in result.tensors] == [t.name for t in original.tensors]
    for mine, theirs in zip(result.tensors, original.tensors, strict=True):
        assert np.array_equal(np.asarray(mine.data), np.asarray(theirs.data)), mine.name
    assert not [key for key in result.fields if key.startswith("split.")]
    # llama.cpp reads the split model from its first part and the joined one alike
    split_logits = prompt_logits(split_trunk)
    assert np.isfinite(split_logits).all()
    assert np.array_equal(split_logits, prompt_logits(joined))


def test_the_joined_file_takes_the_head(
    split_trunk: Path, graft_files: dict[str, Path], tmp_path: Path
) -> None:
    joined = join_split_gguf(split_trunk, tmp_path / "joined.gguf")
    out = tmp_path / "grafted.gguf"
    graft_mtp(joined, graft_files["sidecar_fp8"], out)
    metadata = read_gguf_header(out).metadata
    assert metadata["qwen35.nextn_predict_layers"] == 1
    assert metadata["qwen35.block_count"] == 9


def test_a_missing_part_is_named(split_trunk: Path, tmp_path: Path) -> None:
    lonely = tmp_path / split_trunk.name
    lonely.write_bytes(split_trunk.read_bytes())
    with pytest.raises(GraftError, match=r"Demo-Q8_0-00002-of-00003\.gguf, Demo-Q8_0-00003-of"):
        split_parts(lonely)
    with pytest.raises(GraftError, match="is not the first part of a split GGUF"):
        split_parts(split_trunk.with_name("Demo-Q8_0-00002-of-00003.gguf"))
    assert not list(tmp_path.glob("*.join-partial"))
