"""The demo's FP8 release converted to BF16: every value exact, the files a loader needs, the
same greedy reply as the BF16 original, and refusals that leave nothing behind."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import safetensors

from app.engine.convert.fp8_check import FP8_REFUSAL, fp8_checkpoint
from app.engine.convert.job import ConvertRequest, convert_checkpoint, default_output_folder
from app.engine.errors import ConvertError, JobCancelled, RuntimeBackendError
from app.engine.jobs import JobContext, ProgressEvent
from app.engine.runtime.backends.choice import choose_backend
from tests.convert.conftest import BF16_DEMO, FP8_DEMO
from tests.mtp.checkpoints import fp8_e4m3_value

PROMPT = "Write a Python function that adds two numbers."


E4M3 = np.array([fp8_e4m3_value(code) for code in range(256)], dtype=np.float32)


def _tensors(folder: Path) -> dict[str, tuple[str, np.ndarray]]:
    """name → (dtype, values as F32) for every tensor of the folder's shards."""
    decoders = {
        "F8_E4M3": lambda raw: E4M3[np.frombuffer(raw, np.uint8)],
        "BF16": lambda raw: (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32),
        "F32": lambda raw: np.frombuffer(raw, "<f4"),
    }
    tensors: dict[str, tuple[str, np.ndarray]] = {}
    for shard in sorted(folder.glob("model*.safetensors")):
        for name, info in safetensors.deserialize(shard.read_bytes()):
            values = decoders[info["dtype"]](bytes(info["data"])).reshape(info["shape"])
            tensors[name] = (info["dtype"], values)
    return tensors


def _bf16(values: np.ndarray) -> np.ndarray:
    """F32 → BF16 bits, round to nearest even (integer arithmetic)."""
    bits = values.astype(np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def _dequantised(weight: np.ndarray, scale_inv: np.ndarray) -> np.ndarray:
    """DeepSeek's weight_dequant: each 128×128 tile times its stored scale, in F32, once to BF16."""
    rows, cols = weight.shape
    tiles = np.repeat(np.repeat(scale_inv, 128, axis=0), 128, axis=1)[:rows, :cols]
    return _bf16(weight * tiles)


def test_every_tensor_is_dequantised_exactly_and_the_scales_are_gone(bf16_copy: Path) -> None:
    source = _tensors(FP8_DEMO)
    converted = _tensors(bf16_copy)
    weights = {name for name in source if not name.endswith("_scale_inv")}
    assert set(converted) == weights
    fp8 = [name for name in weights if source[name][0] == "F8_E4M3"]
    assert len(fp8) == 70  # 62 trunk linears + 8 in the MTP head
    assert any(name.startswith("mtp.") for name in fp8)
    for name in weights:
        dtype, values = converted[name]
        assert dtype == "BF16", name
        if name in fp8:
            expected = _dequantised(source[name][1], source[f"{name}_scale_inv"][1])
        else:
            expected = _bf16(source[name][1])
        assert np.array_equal(_bf16(values), expected), name


def test_the_copy_has_the_config_without_quantisation_and_every_other_file(
    bf16_copy: Path,
) -> None:
    config = json.loads((bf16_copy / "config.json").read_text())
    original = json.loads((FP8_DEMO / "config.json").read_text())
    assert "quantization_config" not in config
    original.pop("quantization_config")
    assert config == original
    index = json.loads((bf16_copy / "model.safetensors.index.json").read_text())
    assert not [name for name in index["weight_map"] if name.endswith("_scale_inv")]
    assert set(index["weight_map"].values()) == {p.name for p in bf16_copy.glob("model-*")}
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        assert (bf16_copy / name).read_bytes() == (FP8_DEMO / name).read_bytes()
    assert fp8_checkpoint(bf16_copy) is None
    assert [p.name for p in bf16_copy.parent.iterdir()] == [bf16_copy.name]  # no leftovers


def _greedy_tokens(folder: Path) -> list[int]:
    from mlx_lm import load, stream_generate
    from mlx_lm.sample_utils import make_sampler

    model, tokenizer = load(str(folder))
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": PROMPT}], add_generation_prompt=True
    )
    replies = stream_generate(
        model, tokenizer, prompt=prompt, max_tokens=32, sampler=make_sampler(0.0)
    )
    return [reply.token for reply in replies]


@pytest.mark.slow
def test_mlx_loads_the_copy_and_replies_as_the_bf16_original_does(bf16_copy: Path) -> None:
    tokens = _greedy_tokens(bf16_copy)
    assert len(tokens) > 8
    assert tokens == _greedy_tokens(BF16_DEMO)


def test_the_fp8_release_is_recognised_with_a_one_line_reason() -> None:
    found = fp8_checkpoint(FP8_DEMO)
    assert found is not None and found.scale_tensors == 70 and found.quant_method == "fp8"
    first, *rest = found.refusal().splitlines()
    assert first.startswith(f"{FP8_REFUSAL}: demo-mtp-fp8 stores its weights as FP8")
    assert len(first) < 140 and rest and "mtp-studio convert" in rest[0]
    assert fp8_checkpoint(BF16_DEMO) is None


def test_an_existing_output_is_refused_and_left_alone(tmp_path: Path) -> None:
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(ConvertError, match="already exists"):
        convert_checkpoint(ConvertRequest(FP8_DEMO, out))
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_a_bf16_checkpoint_is_refused_without_writing(tmp_path: Path) -> None:
    with pytest.raises(ConvertError, match="already a BF16/F16 checkpoint"):
        convert_checkpoint(ConvertRequest(BF16_DEMO, tmp_path / "out"))
    assert list(tmp_path.iterdir()) == []


def test_progress_counts_the_bytes_read_up_to_the_total(tmp_path: Path) -> None:
    events: list[ProgressEvent] = []
    ctx = JobContext(
        emit=lambda event: events.append(event) if isinstance(event, ProgressEvent) else None
    )
    convert_checkpoint(ConvertRequest(FP8_DEMO, tmp_path / "out"), ctx)
    shards = sum(path.stat().st_size for path in FP8_DEMO.glob("model-*.safetensors"))
    assert events[-1].done == events[-1].total
    assert 0.99 * shards < events[-1].total < shards  # the tensors' bytes, not the headers
    assert [event.done for event in events] == sorted(event.done for event in events)


def test_a_cancelled_conversion_leaves_nothing(tmp_path: Path) -> None:
    ctx = JobContext()

    def cancel_midway(event: object) -> None:
        if isinstance(event, ProgressEvent) and event.done > event.total // 3:
            ctx.cancel.cancel()

    ctx.emit = cancel_midway
    with pytest.raises(JobCancelled):
        convert_checkpoint(ConvertRequest(FP8_DEMO, tmp_path / "out"), ctx)
    assert list(tmp_path.iterdir()) == []


def test_the_default_output_is_beside_the_source_or_in_the_app_folder_for_a_cache(
    tmp_path: Path,
) -> None:
    local = tmp_path / "Qwen3-Tiny-FP8"
    local.mkdir()
    converted = tmp_path / "converted"
    assert default_output_folder(local, None, converted) == tmp_path / "Qwen3-Tiny-bf16"
    assert default_output_folder(local, 4, converted) == tmp_path / "Qwen3-Tiny-mlx-4bit"
    snapshot = tmp_path / "hub" / "models--acme--Big-FP8" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    assert default_output_folder(snapshot, None, converted) == converted / "Big-bf16"


def test_the_mlx_backend_refuses_the_fp8_release_in_one_line_and_takes_the_copy(
    bf16_copy: Path,
) -> None:
    with pytest.raises(RuntimeBackendError) as refused:
        choose_backend("auto", FP8_DEMO)
    first, hint = str(refused.value).splitlines()
    assert first == f"{FP8_REFUSAL}: demo-mtp-fp8 stores its weights as FP8 with 70 block scales."
    assert f"`mtp-studio convert {FP8_DEMO}`" in hint and "search the Hub" in hint
    assert choose_backend("auto", bf16_copy).name == "mlx"
