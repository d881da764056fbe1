"""A Gemma 4 target and its drafter as a user meets them: ``chat``, ``serve``, the worker and the
picker.

``mtp-studio chat --model <target>.gguf`` finds the drafter beside the target (or in ``MTP/``)
and drafts with it; ``--drafter FILE`` names one; a drafter that does not fit is refused in one
line before any worker starts; a drafter opened as the model is refused; ``serve`` says what it
drafts with and its replies carry the drafts; a vision projector beside the target is neither a
model nor a drafter, and a text chat beside it drafts exactly.
"""

from __future__ import annotations

import json
import multiprocessing
import shutil
from pathlib import Path

import httpx2
import numpy as np
import pytest
from gguf import GGUFWriter

from app.cli import main
from app.engine.chat.discovery import ModelSources, discover_models
from app.engine.errors import DrafterError
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.process.client import RuntimeClient
from tests.drafter.pairs import PAIRS, Pair, rewrite_gguf
from tests.server.server_process import running_server

DENSE, CENTROID = PAIRS["dense"], PAIRS["centroid"]


@pytest.fixture(autouse=True)
def app_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test keeps its app folders (the adaptive depth's memory) to itself."""
    home = tmp_path / "app-home"
    monkeypatch.setenv("MTP_STUDIO_HOME", str(home))
    return home


def _chat(model: Path, *extra: str) -> list[str]:
    return ["chat", "--model", str(model), "--threads", "1", "--ctx", "1024", *extra]


def _ask(model: Path, capsys: pytest.CaptureFixture, *extra: str) -> tuple[dict, str]:
    args = _chat(model, "--prompt", "How do I sort a list?", "--temp", "0", "--json", *extra)
    assert main([*args, "--max-tokens", "32"]) == 0
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


@pytest.mark.slow
@pytest.mark.parametrize("pair", PAIRS.values(), ids=PAIRS)
def test_chat_finds_the_drafter_beside_the_target_and_drafts_exactly(
    pair: Pair, capsys: pytest.CaptureFixture
) -> None:
    plain, _ = _ask(pair.target, capsys, "--mtp-depth", "0")
    drafted, _ = _ask(pair.target, capsys, "--mtp-depth", "3")
    assert drafted["token_ids"] == plain["token_ids"]
    assert sum(drafted["stats"]["accepted_by_depth"]) > 0
    args = _chat(pair.target, "--prompt", "Hi", "--max-tokens", "4", "--mtp-depth", "2")
    assert main(args) == 0
    err = capsys.readouterr().err
    assert f"llama.cpp · drafter {pair.drafter.name} (381.2 kB, 4 layers), depth 2" in err
    assert f"· drafter: {pair.drafter}" in err


@pytest.mark.slow
def test_chat_drafter_names_a_drafter_kept_elsewhere(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    target = Path(shutil.copy(DENSE.target, tmp_path / DENSE.target.name))
    alone, _ = _ask(target, capsys, "--mtp-depth", "2")
    assert alone["stats"]["mode"] == "ar"
    assert "drafts with a separate drafter model and none was found" in alone["note"]
    named, _ = _ask(target, capsys, "--mtp-depth", "2", "--drafter", str(DENSE.drafter))
    assert named["token_ids"] == alone["token_ids"]
    assert sum(named["stats"]["drafted_by_depth"]) > 0


def test_a_drafter_that_does_not_fit_is_refused_in_one_line_before_anything_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    wide = rewrite_gguf(
        DENSE.drafter, tmp_path / "wide.gguf", {"gemma4-assistant.embedding_length_out": 256}
    )
    workers_before = len(multiprocessing.active_children())
    with pytest.raises(DrafterError) as refused:
        RuntimeClient(DENSE.target, settings=LoadSettings(drafter=wide))
    assert "\n" not in str(refused.value)
    assert len(multiprocessing.active_children()) == workers_before  # no worker started
    assert main(_chat(DENSE.target, "--prompt", "Hi", "--drafter", str(wide))) == 2
    err = capsys.readouterr().err
    assert err == (
        "mtp-studio: error: wide.gguf was made for a target of hidden size 256 but "
        "gemma4-tiny-dense-Q8_0.gguf has 128; use the drafter made for this model size\n"
    )


def test_a_drafter_opened_as_the_model_is_refused(capsys: pytest.CaptureFixture) -> None:
    assert main(_chat(CENTROID.drafter, "--prompt", "Hi")) == 2
    assert "is a drafter (gemma4-assistant): it drafts for another model" in (
        capsys.readouterr().err
    )


@pytest.mark.slow
def test_serve_drafts_with_the_named_drafter(app_home: Path) -> None:
    with running_server(
        "--model", str(DENSE.target), "--drafter", str(DENSE.drafter),
        "--mtp-depth", "3", "--threads", "1", "--ctx", "1024",
        home=app_home,
    ) as server:  # fmt: skip
        announced = server.wait_for_line("listening on")
        assert f"drafter {DENSE.drafter.name} (381.2 kB, 4 layers)" in announced
        reply = httpx2.post(
            f"{server.base_url}/chat/completions",
            json={
                "messages": [{"role": "user", "content": "How do I sort a list?"}],
                "max_tokens": 32,
                "temperature": 0,
            },
            timeout=60,
        ).json()
    mtp = reply["mtp"]
    assert sum(mtp["drafted_by_depth"]) > 0 and sum(mtp["accepted_by_depth"]) > 0


def _projector(path: Path) -> Path:
    """A projector-shaped GGUF (architecture ``clip``, named ``mmproj-*.gguf`` as Gemma 4 repos
    ship theirs beside the trunk) that llama.cpp's mtmd cannot load: no tiny Gemma 4 vision
    projector exists here."""
    writer = GGUFWriter(path, "clip")
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_tensor("mm.input_projection.weight", np.zeros((8, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.slow
def test_a_projector_beside_the_target_is_neither_a_model_nor_a_drafter(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The picker lists the target (not the projector) with its drafter. The chat loads a
    projector it finds beside the model (images on); one it cannot load is one line naming it,
    and ``--mmproj none`` then chats in text, drafting exactly (a text chat has no image rows)."""
    folder = tmp_path / "gemma"
    folder.mkdir()
    target = Path(shutil.copy(CENTROID.target, folder / CENTROID.target.name))
    drafter = Path(shutil.copy(CENTROID.drafter, folder / CENTROID.drafter.name))
    projector = _projector(folder / "mmproj-gemma4-tiny-centroid-F16.gguf")
    found = discover_models(ModelSources(model_roots=(tmp_path,)))
    listed = [model for model in found if model.path.parent == folder]
    assert [model.path for model in listed] == [target]
    assert listed[0].drafter == drafter and listed[0].drafter_bytes == drafter.stat().st_size
    assert main(_chat(target, "--prompt", "Hi", "--max-tokens", "4")) == 2
    refusal = capsys.readouterr().err
    assert refusal.count("\n") == 1 and projector.name in refusal
    plain, _ = _ask(target, capsys, "--mtp-depth", "0", "--mmproj", "none")
    drafted, _ = _ask(target, capsys, "--mtp-depth", "3", "--mmproj", "none")
    assert drafted["token_ids"] == plain["token_ids"]
    assert sum(drafted["stats"]["accepted_by_depth"]) > 0


@pytest.mark.slow
def test_bench_decode_runs_llama_servers_draft_mtp_on_the_same_pair(
    llama_server_binary: Path, capsys: pytest.CaptureFixture
) -> None:
    """``bench decode --vs-llama-server`` gives llama-server the drafter ours found beside the
    target (``--model-draft``): both loops draft, and at temperature 0 they accept alike."""
    args = ["bench", "decode", "--model", str(DENSE.target), "--depths", "2", "--temp", "0"]
    args += ["--threads", "1", "--max-tokens", "32", "--repeats", "1", "--json"]
    assert main([*args, "--vs-llama-server", str(llama_server_binary)]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["greedy_identical"]
    ours = next(row for row in figures["modes"] if row["mode"] == "lc" and row["depth"] == 2)
    theirs = next(row for row in figures["llama_server"] if row["depth"] == 2 and not row["p_min"])
    assert theirs["drafted"] > 0 and theirs["accepted"] > 0
    ours_pooled = (ours["tokens_per_cycle"] - 1) / 2
    assert abs(ours_pooled - theirs["acceptance"]) < 0.1
