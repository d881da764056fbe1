"""The MLX backend as a user meets it: backend choice, the picker, and ``mtp-studio chat``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.cli import main
from app.engine.chat.discovery import ModelSources, discover_models
from app.engine.chat.model_files import HF_FOLDER, describe_model
from app.engine.runtime.backends.choice import LLAMA_CPP, MLX, choose_backend
from app.engine.runtime.backends.mlx.backend import MlxBackend
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.demo_model import demo_model_path
from app.engine.runtime.core.request import GenerationRequest
from app.engine.runtime.sampling.sampler import SamplerSettings
from app.engine.runtime.speculative.generation import generate
from tests.runtime.mlx.conftest import MlxDemo
from tests.store.isolation import isolate


def test_auto_picks_mlx_for_a_folder_and_llama_cpp_for_a_gguf(mlx_demo: MlxDemo) -> None:
    folder = choose_backend("auto", mlx_demo.four_bit)
    assert folder.name == MLX
    assert folder.reason == "a model folder runs on mlx-lm (mlx on CPU)"
    gguf = choose_backend("auto", demo_model_path())
    assert gguf.name == LLAMA_CPP and gguf.reason == "a GGUF file runs on llama.cpp"
    assert choose_backend(MLX, mlx_demo.four_bit).reason.startswith("chosen with --backend mlx")


def test_the_picker_offers_a_converted_folder_with_its_sidecar(
    mlx_demo: MlxDemo, tmp_path: Path
) -> None:
    folder = tmp_path / "models" / "demo-mtp-mlx-4bit"
    shutil.copytree(mlx_demo.four_bit, folder)
    shutil.copy(mlx_demo.sidecar, folder / "mtp.safetensors")
    described = describe_model(folder)
    assert described.kind == HF_FOLDER and described.runnable
    found = discover_models(ModelSources(model_roots=(tmp_path / "models",), demo_dir=tmp_path))
    [model] = [m for m in found if m.path == folder]
    assert model.sidecar == folder / "mtp.safetensors"


@pytest.mark.slow
def test_chat_on_mlx_with_a_sidecar_end_to_end(
    mlx_demo: MlxDemo, four_bit: MlxBackend, capsys: pytest.CaptureFixture
) -> None:
    args = ["chat", "--model", str(mlx_demo.four_bit), "--backend", "mlx"]
    args += ["--sidecar", str(mlx_demo.sidecar), "--prompt", "Hello", "--temp", "0"]
    args += ["--max-tokens", "10", "--mtp-depth", "2"]
    assert main([*args, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["stats"]["mode"] == "lc" and answer["stats"]["depth"] == 2
    assert sum(answer["stats"]["drafted_by_depth"]) > 0
    expected = generate(
        four_bit,
        GenerationRequest(
            messages=(ChatMessage("user", "Hello"),),
            max_tokens=10,
            sampler=SamplerSettings(temperature=0.0),
            mtp_depth=0,
        ),
        emit=lambda _c: None,
        cancelled=lambda: False,
    )
    assert answer["token_ids"] == list(expected.token_ids)
    assert answer["text"] == expected.text

    assert main(args) == 0
    streamed = capsys.readouterr()
    assert streamed.out.strip() == expected.text.strip()
    assert "mlx · MTP head: 1 layer(s), depth 2" in streamed.err
    assert (
        f"backend: mlx — chosen with --backend mlx (mlx on CPU) · sidecar: {mlx_demo.sidecar}"
        in (streamed.err)
    )
    assert "acceptance by depth" in streamed.err


def test_a_sidecar_with_a_gguf_is_refused_with_what_to_do(
    mlx_demo: MlxDemo, capsys: pytest.CaptureFixture
) -> None:
    args = ["chat", "--sidecar", str(mlx_demo.sidecar), "--prompt", "x"]
    assert main(args) == 2
    error = capsys.readouterr().err
    assert "graft the sidecar into the GGUF instead, or open the model's folder" in error


@pytest.mark.slow
def test_without_sidecar_chat_pairs_a_cached_sidecar_repo(
    mlx_demo: MlxDemo,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
) -> None:
    home = isolate(monkeypatch, tmp_path / "home")
    folder = home.hub_cache / "models--acme--demo-mtp-MLX-4bit" / "snapshots" / "abc"
    shutil.copytree(mlx_demo.four_bit, folder)
    sidecar = (
        home.hub_cache / "models--acme--demo-mtp-mtp" / "snapshots" / "def" / "mtp.safetensors"
    )
    sidecar.parent.mkdir(parents=True)
    shutil.copy(mlx_demo.sidecar, sidecar)
    args = ["chat", "--model", str(folder), "--prompt", "Hi", "--temp", "0", "--max-tokens", "6"]
    assert main([*args, "--mtp-depth", "2"]) == 0
    err = capsys.readouterr().err
    assert "mlx · MTP head: 1 layer(s), depth 2" in err
    assert f"sidecar: {sidecar}" in err
