"""The model picker's facts: what a model is, whether it has MTP heads, what it will cost in
memory, where downloaded models and sidecars are found, and readable problems for bad files."""

from __future__ import annotations

import shutil
from pathlib import Path

import gguf
import pytest

from app.engine.chat.discovery import ModelSources, default_model_roots, discover_models
from app.engine.chat.memory import RUNTIME_DEFAULT_CONTEXT
from app.engine.chat.model_files import DEMO, DOWNLOADED, GGUF, HF_FOLDER, OPENED, describe_model
from app.engine.chat.sidecar import base_slug
from app.engine.gguf_header import LongArray, read_gguf_header
from app.engine.runtime.backends.llama_cpp import model as llama_cpp_model
from app.engine.runtime.core.demo_model import (
    DEMO_MODEL_FILENAME,
    DEMO_VISION_MODEL,
    MODELS_DIR,
)
from tests.chat.hub_cache import put_in_cache
from tests.mtp.checkpoints import build_qwen35
from tests.runtime.tiny_model import TinyModelShape, vocabulary


def test_the_fast_header_reader_agrees_with_the_gguf_package(tiny_gguf: Path) -> None:
    header = read_gguf_header(tiny_gguf)
    ours = header.metadata
    reference = gguf.GGUFReader(tiny_gguf, "r")
    for key, field in reference.fields.items():
        if key.startswith("GGUF."):
            continue
        value = field.contents()
        if isinstance(value, list) and len(value) > 64:
            assert ours[key] == LongArray(len(value)), key
        elif isinstance(value, float):
            assert ours[key] == pytest.approx(value), key
        else:
            assert ours[key] == value, key
    assert header.required_bytes == tiny_gguf.stat().st_size


def test_a_gguf_with_an_mtp_block_is_described(tiny_gguf: Path) -> None:
    model = describe_model(tiny_gguf)
    shape = TinyModelShape()
    assert model.runnable and model.problem is None
    assert (model.kind, model.origin, model.architecture) == (GGUF, OPENED, "qwen35")
    assert model.mtp_blocks == 1 and model.mtp_note is None
    assert model.size_bytes == tiny_gguf.stat().st_size
    assert model.chat_template is not None and "<|im_start|>" in model.chat_template
    memory = model.memory
    assert memory is not None and memory.context == RUNTIME_DEFAULT_CONTEXT
    attention_layers = shape.n_trunk_layers // shape.full_attention_interval + 1  # + MTP block
    kv = RUNTIME_DEFAULT_CONTEXT * attention_layers * shape.n_head_kv * 2 * shape.head_dim * 2
    assert memory.cache_bytes > kv  # plus the recurrent states and their draft snapshots
    assert memory.weights_bytes == model.size_bytes
    vocab = len(vocabulary()[0])
    assert memory.compute_bytes >= 2 * 512 * vocab * 4  # a batch of logits in both contexts
    assert memory.total_bytes > model.size_bytes


def test_the_estimate_uses_the_runtime_context() -> None:
    assert RUNTIME_DEFAULT_CONTEXT == llama_cpp_model.DEFAULT_CONTEXT


def test_a_gguf_without_mtp_says_why_decoding_is_plain(
    tiny_gguf_without_mtp: Path, tiny_gguf: Path
) -> None:
    model = describe_model(tiny_gguf_without_mtp)
    assert model.runnable and model.mtp_blocks == 0
    assert model.mtp_note is not None
    assert "has no MTP block (qwen35.nextn_predict_layers is absent or 0)" in model.mtp_note
    with_mtp = describe_model(tiny_gguf).memory
    assert model.memory is not None and with_mtp is not None
    assert with_mtp.compute_bytes == 2 * model.memory.compute_bytes  # the draft context
    assert with_mtp.cache_bytes > model.memory.cache_bytes  # its KV cache and the snapshots


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"PK\x03\x04 a zip file, not a model", "does not start with the GGUF magic bytes"),
        (b"GGUF\x03\x00\x00\x00\x00\x00", "ends inside its header"),
    ],
)
def test_a_bad_file_is_a_readable_problem_on_its_row(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(content)
    model = describe_model(path)
    assert not model.runnable
    assert model.problem is not None
    assert expected in model.problem and "re-download it" in model.problem


def test_a_truncated_download_is_caught_from_its_header(tmp_path: Path, tiny_gguf: Path) -> None:
    data = tiny_gguf.read_bytes()
    truncated = tmp_path / "cut.gguf"
    truncated.write_bytes(data[: len(data) - 4096])
    model = describe_model(truncated)
    assert not model.runnable and model.problem is not None
    assert model.problem == (
        f"cut.gguf is incomplete: its tensors need {len(data):,} bytes but the file has "
        f"{len(data) - 4096:,} (an interrupted download or copy); download it again"
    )


def test_a_split_gguf_with_a_missing_part_is_a_problem(tmp_path: Path, tiny_gguf: Path) -> None:
    first = tmp_path / "big-00001-of-00002.gguf"
    shutil.copyfile(tiny_gguf, first)
    model = describe_model(first)
    assert model.problem is not None
    assert "big-00002-of-00002.gguf is missing" in model.problem


def test_a_hugging_face_folder_is_described_and_runs_on_mlx(tmp_path: Path) -> None:
    checkpoint = build_qwen35(tmp_path / "Qwen3.5-tiny")
    model = describe_model(checkpoint.folder)
    assert model.kind == HF_FOLDER and model.problem is None
    assert model.architecture == "Qwen3_5ForConditionalGeneration"
    assert model.mtp_blocks == 1 and model.mtp_note is None
    assert model.size_bytes == sum(f.stat().st_size for f in checkpoint.shard_files)
    assert model.runnable and model.runnable_reason is None


def test_discovery_lists_demo_downloads_and_opened_models_and_pairs_sidecars(
    tmp_path: Path, tiny_gguf: Path, tiny_gguf_without_mtp: Path
) -> None:
    demo_dir = tmp_path / "demo"
    demo_dir.mkdir()
    shutil.copyfile(tiny_gguf, demo_dir / DEMO_MODEL_FILENAME)
    cache = tmp_path / "hf" / "hub"
    with_heads = put_in_cache(cache, "acme/Tiny-MTP-GGUF", "tiny-Q8_0.gguf", tiny_gguf)
    plain = put_in_cache(
        cache, "acme/Tiny-Plain-GGUF", "tiny-plain-Q4_K_M.gguf", tiny_gguf_without_mtp
    )
    sidecar = put_in_cache(cache, "someone/Tiny-Plain-mtp", "mtp.safetensors", tiny_gguf)
    put_in_cache(cache, "acme/Tiny-Plain-GGUF", "mmproj-tiny.gguf", tiny_gguf)
    put_in_cache(cache, "acme/Tiny-Plain-GGUF", "mtp-tiny-plain.gguf", tiny_gguf)
    models_folder = tmp_path / "models"
    (models_folder / "nested").mkdir(parents=True)
    loose = shutil.copyfile(tiny_gguf_without_mtp, models_folder / "nested" / "loose.gguf")
    (models_folder / "nested" / "mtp.safetensors").write_bytes(b"sidecar beside the file")
    opened_file = shutil.copyfile(tiny_gguf, tmp_path / "mine.gguf")
    hf_folder = build_qwen35(tmp_path / "checkpoints" / "Qwen3.5-tiny").folder

    models = discover_models(
        ModelSources(
            model_roots=default_model_roots(models_folder, cache),
            opened=(opened_file, hf_folder, tmp_path / "deleted.gguf"),
            demo_dir=demo_dir,
        )
    )
    by_path = {model.path: model for model in models}
    assert [model.path for model in models] == [
        demo_dir / DEMO_MODEL_FILENAME,
        loose,
        with_heads,
        plain,
        opened_file,
        hf_folder,
    ]
    assert by_path[demo_dir / DEMO_MODEL_FILENAME].origin == DEMO
    assert by_path[with_heads].origin == DOWNLOADED
    assert by_path[with_heads].repo_id == "acme/Tiny-MTP-GGUF"
    assert by_path[with_heads].sidecar is None  # it has its own heads
    assert by_path[plain].sidecar == sidecar
    assert by_path[loose].sidecar == models_folder / "nested" / "mtp.safetensors"
    assert by_path[opened_file].origin == OPENED
    assert by_path[hf_folder].kind == HF_FOLDER


def test_the_bundled_vision_demo_is_listed_after_the_text_demo(tmp_path: Path) -> None:
    models = discover_models(ModelSources(model_roots=(tmp_path / "empty",), demo_dir=MODELS_DIR))
    assert [model.path for model in models] == [MODELS_DIR / DEMO_MODEL_FILENAME, DEMO_VISION_MODEL]
    vision = models[1]
    assert vision.origin == DEMO and vision.runnable and vision.mtp_blocks == 1


def test_a_catalog_sidecar_repo_is_paired_even_with_another_name(
    tmp_path: Path, tiny_gguf_without_mtp: Path, tiny_gguf: Path
) -> None:
    cache = tmp_path / "hub"
    plain = put_in_cache(cache, "acme/Tiny-Plain-GGUF", "tiny.gguf", tiny_gguf_without_mtp)
    sidecar = put_in_cache(cache, "acme/heads-for-tiny", "mtp.safetensors", tiny_gguf)
    sources = ModelSources(model_roots=(cache,), demo_dir=tmp_path / "none")
    (unpaired,) = discover_models(sources)
    assert unpaired.path == plain and unpaired.sidecar is None
    paired_sources = ModelSources(
        model_roots=(cache,),
        demo_dir=tmp_path / "none",
        catalog_sidecars={"acme/Tiny-Plain-GGUF": "acme/heads-for-tiny"},
    )
    (paired,) = discover_models(paired_sources)
    assert paired.sidecar == sidecar


@pytest.mark.parametrize(
    ("repo_name", "slug"),
    [
        ("Qwen3.6-27B-GGUF", "Qwen3.6-27B"),
        ("Qwen3.5-9B-MLX-4bit", "Qwen3.5-9B"),
        ("DeepSeek-V3-0324-Q4_K_M", "DeepSeek-V3-0324"),
        ("Qwen3-Next-80B-A3B-Instruct-FP8", "Qwen3-Next-80B-A3B-Instruct"),
    ],
)
def test_the_base_slug_drops_format_and_quant_suffixes(repo_name: str, slug: str) -> None:
    assert base_slug(repo_name) == slug
