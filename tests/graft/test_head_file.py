"""A separate head file (``mtp-*.gguf``, as ``convert_hf_to_gguf.py --mtp`` writes it) grafted
into the trunk converted with ``--no-mtp`` gives back the converter's one-file model: the demo's
tensors byte for byte, and in llama.cpp the demo's greedy tokens with MTP drafting."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFReader

from app.engine.errors import GraftError
from app.engine.graft.head_file import graft_head_file
from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.request import GenerationRequest, GenerationResult
from app.engine.runtime.speculative.generation import generate
from tests.graft.bases import ARCH, DEMO_GGUF
from tests.graft.test_cli import cli
from tests.store.isolation import IsolatedHome


@pytest.fixture(scope="module")
def joined(graft_files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("head-file") / "Demo-MTP-Q8_0-mtp.gguf"
    graft_head_file(graft_files["trunk_q8"], graft_files["head_file"], out)
    return out


def tensors(path: Path) -> dict[str, tuple[int, bytes]]:
    return {
        t.name: (int(t.tensor_type), np.asarray(t.data).tobytes()) for t in GGUFReader(path).tensors
    }


@pytest.mark.slow
def test_the_graft_holds_the_demo_models_tensors_and_head_metadata(joined: Path) -> None:
    assert tensors(joined) == tensors(DEMO_GGUF)
    ours, demo = GGUFReader(joined).fields, GGUFReader(DEMO_GGUF).fields
    for key in ("block_count", "nextn_predict_layers", "attention.recurrent_layers"):
        assert ours[f"{ARCH}.{key}"].contents() == demo[f"{ARCH}.{key}"].contents(), key


def run(backend: LlamaCppBackend, depth: int) -> GenerationResult:
    request = GenerationRequest(
        messages=(ChatMessage("user", "Merge two sorted lists into one."),),
        max_tokens=48,
        mtp_depth=depth,
    )
    return generate(backend, request, emit=lambda _c: None, cancelled=lambda: False)


def test_llama_cpp_drafts_with_the_grafted_head_and_gives_the_demo_models_tokens(
    joined: Path,
) -> None:
    settings = LoadSettings(threads=1, context_length=512)
    grafted, demo = LlamaCppBackend(joined, settings), LlamaCppBackend(DEMO_GGUF, settings)
    try:
        assert grafted.info.mtp_available and grafted.info.mtp_layers == 1
        reference = run(demo, 0)
        drafted = run(grafted, 2)
        assert drafted.token_ids == reference.token_ids
        assert drafted.stats.accepted_by_depth[0] > 0
        assert drafted.stats.accepted_by_depth == run(demo, 2).stats.accepted_by_depth
    finally:
        grafted.close()
        demo.close()


def test_the_graft_command_takes_a_head_file_for_its_sidecar(
    graft_files: dict[str, Path], tmp_path: Path, home: IsolatedHome
) -> None:
    out = tmp_path / "joined.gguf"
    done = cli(
        home,
        "--base",
        str(graft_files["trunk_q8"]),
        "--sidecar",
        str(graft_files["head_file"]),
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    assert "blocks: 8 trunk + 1 MTP" in done.stdout
    assert tensors(out) == tensors(DEMO_GGUF)


def test_a_trunk_that_has_its_head_is_refused(graft_files: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(GraftError, match="already has an MTP head"):
        graft_head_file(DEMO_GGUF, graft_files["head_file"], tmp_path / "out.gguf")
    assert not list(tmp_path.iterdir())


def test_a_plain_model_given_as_the_head_file_is_refused(
    graft_files: dict[str, Path], tmp_path: Path
) -> None:
    with pytest.raises(GraftError, match=r"declares no qwen35\.nextn_predict_layers"):
        graft_head_file(graft_files["trunk_q8"], graft_files["trunk_q4"], tmp_path / "out.gguf")
