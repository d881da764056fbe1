"""Bad inputs to the MLX backend, through the inference worker as the CLI and chat use it.

Each gives one clear message (the file, the tensor and both shapes where they disagree); a head
that cannot be used leaves the model decoding plainly with the reason as a note, and the worker
keeps serving.
"""

from __future__ import annotations

import sys
from pathlib import Path

import mlx.core as mx
import pytest

from app.engine.errors import ImageError, RuntimeBackendError
from app.engine.runtime.backends import choice as backends
from app.engine.runtime.backends.mlx.backend import MlxBackend
from app.engine.runtime.chat_format.images import ImageLimits, read_image
from app.engine.runtime.chat_format.prompting import ChatMessage, PlacedImage
from app.engine.runtime.core.request import GenerationRequest
from app.engine.runtime.process.client import RuntimeClient
from app.engine.runtime.sampling.sampler import SamplerSettings
from app.engine.runtime.speculative.generation import generate
from tests.runtime.mlx.conftest import SETTINGS, MlxDemo
from tests.runtime.mlx.tiny_models import DEEPSEEK_V3, LLAMA, write_nextn_sidecar, write_tiny_folder
from tests.vision.conftest import picture

REQUEST = GenerationRequest(
    prompt="The sea", max_tokens=4, sampler=SamplerSettings(temperature=0.0), mtp_depth=2
)


def _narrow_sidecar(template: Path, path: Path) -> Path:
    """A Qwen-style head of another model: hidden size 128 instead of the demo's 256."""
    narrower = {256: 128, 512: 256}
    tensors = {
        name: mx.random.normal(tuple(narrower.get(size, size) for size in value.shape)).astype(
            mx.bfloat16
        )
        for name, value in mx.load(str(template)).items()
    }
    mx.save_safetensors(str(path), tensors, metadata={"mtp_layout": "qwen-mtp"})
    return path


def _plain_with_reason(model: Path, sidecar: Path | None, *reason: str) -> None:
    with RuntimeClient(model, settings=SETTINGS, sidecar=sidecar) as client:
        info = client.load()
        assert not info.mtp_available and info.max_draft_depth == 0
        for part in reason:
            assert part in (info.mtp_unavailable_reason or ""), info.mtp_unavailable_reason
        result = client.generate(REQUEST)
        assert len(result.token_ids) == 4 and result.stats.depth == 0
        assert result.note == info.mtp_unavailable_reason


@pytest.mark.slow
def test_another_models_sidecar_names_the_tensor_and_both_shapes(
    mlx_demo: MlxDemo, tmp_path: Path
) -> None:
    other = _narrow_sidecar(mlx_demo.sidecar, tmp_path / "other-mtp.safetensors")
    _plain_with_reason(
        mlx_demo.four_bit,
        other,
        str(other),
        "tensor 'mtp.",
        "(256,",
        "(128,",
        "use the sidecar made for this model",
    )


@pytest.mark.slow
def test_a_sidecar_of_another_architecture_is_refused(mlx_demo: MlxDemo, tmp_path: Path) -> None:
    nextn = write_nextn_sidecar(tmp_path / "deepseek-mtp.safetensors", DEEPSEEK_V3)
    _plain_with_reason(mlx_demo.four_bit, nextn, "'deepseek-nextn' head", "qwen-style head")


@pytest.mark.slow
def test_a_corrupt_sidecar_is_a_clear_reason(mlx_demo: MlxDemo, tmp_path: Path) -> None:
    corrupt = tmp_path / "mtp.safetensors"
    corrupt.write_bytes(mlx_demo.sidecar.read_bytes()[:5000])
    _plain_with_reason(mlx_demo.four_bit, corrupt, f"the MTP sidecar {corrupt} cannot be read")


@pytest.mark.slow
def test_a_converted_folder_without_a_sidecar_says_how_to_get_mtp(mlx_demo: MlxDemo) -> None:
    _plain_with_reason(mlx_demo.eight_bit, None, "has no MTP head", "--sidecar FILE")


@pytest.mark.slow
def test_an_architecture_without_mtp_support_decodes_plainly(tmp_path: Path) -> None:
    folder = write_tiny_folder(tmp_path / "tiny-llama", LLAMA)
    _plain_with_reason(folder, None, "no MTP head for model_type 'llama'")


def test_a_folder_without_config_is_refused_before_any_worker(tmp_path: Path) -> None:
    folder = tmp_path / "weights-only"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"")
    with pytest.raises(RuntimeBackendError, match=r"weights-only has no config\.json"):
        RuntimeClient(folder)


def test_a_missing_sidecar_file_is_refused(mlx_demo: MlxDemo, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "mtp.safetensors"
    with pytest.raises(RuntimeBackendError, match=r"sidecar .*nowhere/mtp\.safetensors does not"):
        RuntimeClient(mlx_demo.four_bit, sidecar=missing)


def test_without_mlx_a_folder_says_what_to_install(
    mlx_demo: MlxDemo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "mlx_lm", None)  # what an absent package looks like
    backends.mlx_device.cache_clear()
    try:
        with pytest.raises(RuntimeBackendError, match=r"pip install .*mlx.* mlx-lm"):
            backends.choose_backend("auto", mlx_demo.four_bit)
    finally:
        backends.mlx_device.cache_clear()


def test_a_picture_for_a_text_only_mlx_model_is_refused_in_one_line_saying_why(
    four_bit: MlxBackend,
) -> None:
    shown = read_image(picture(64, 64), ImageLimits(), "picture")
    request = GenerationRequest(
        messages=(ChatMessage("user", "What is it?", images=(PlacedImage(0, shown),)),),
        max_tokens=4,
    )
    assert not four_bit.info.reads_images
    with pytest.raises(ImageError) as refused:
        generate(four_bit, request, emit=lambda _c: None, cancelled=lambda: False)
    message = str(refused.value)
    assert message.startswith(f"{four_bit.info.path.name} has no vision tower") and (
        "\n" not in message
    )
    assert "config.json has no vision_config" in message
