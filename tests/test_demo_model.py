"""The demo MTP model shipped in resources/models/: what a user of the app relies on.

The artifacts are built by tools/train_demo_model.py (torch, not an app dependency), so these tests
only read them — with safetensors, gguf, llama-cpp-python and the project's own MTP extractor:
they are present and small, the HF checkpoint is a Qwen3.5 release with one `mtp.*` layer and
offset-style norms, the GGUF is `qwen35` with its nextn block and holds the checkpoint's weights,
llama.cpp tokenizes as the HF tokenizer did and writes code, and the FP8 "original release"
dequantises, through the extractor, to the checkpoint's MTP tensors.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import gguf
import numpy as np
import pytest
import safetensors
from llama_cpp import Llama

from app.engine.mtp import LocalFolderSource, extract_mtp
from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.backends.llama_cpp.cpu_backends import load_installed
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.demo_model import MODELS_DIR, demo_model_path
from app.engine.runtime.core.request import GenerationRequest
from app.engine.runtime.speculative.generation import generate

MODELS = Path(__file__).resolve().parents[1] / "resources" / "models"
GGUF_PATH = MODELS / "demo-mtp.gguf"
HF_DIR = MODELS / "demo-mtp-hf"
FP8_DIR = MODELS / "demo-mtp-fp8"
MAX_FILE_BYTES = 30 * 1024 * 1024
ACCEPTANCE_REQUESTS = (
    "Return the sum of the squares of the numbers in a list.",
    "Remove a file, ignoring the error if it does not exist.",
    "Return a copy of the string with the first letter of every word capitalised.",
    "Read a configuration file and return its sections as a dictionary.",
    "Return True if the path names an existing directory.",
)
MIN_DEPTH1_ACCEPTANCE = 0.6  # measured 0.77 on these; a mis-converted head gets ~0
MTP_LAYER_TENSORS = {
    "input_layernorm.weight",
    "post_attention_layernorm.weight",
    "self_attn.q_proj.weight",
    "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",
    "self_attn.o_proj.weight",
    "self_attn.q_norm.weight",
    "self_attn.k_norm.weight",
    "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
}
EXPECTED_MTP_NAMES = {
    "mtp.fc.weight",
    "mtp.pre_fc_norm_embedding.weight",
    "mtp.pre_fc_norm_hidden.weight",
    "mtp.norm.weight",
    *(f"mtp.layers.0.{name}" for name in MTP_LAYER_TENSORS),
}


def _to_float32(dtype: str, data: bytes, shape: list[int]) -> np.ndarray:
    """BF16 / F16 / F32 safetensors bytes as float32."""
    if dtype == "BF16":
        bits = np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16
        return bits.view(np.float32).reshape(shape)
    numpy_type = {"F16": "<f2", "F32": "<f4"}[dtype]
    return np.frombuffer(data, dtype=numpy_type).astype(np.float32).reshape(shape)


def _read_safetensors(path: Path) -> dict[str, dict]:
    return dict(safetensors.deserialize(path.read_bytes()))


@pytest.fixture(scope="module")
def release_config() -> dict:
    return json.loads((HF_DIR / "config.json").read_text())


@pytest.fixture(scope="module")
def config(release_config: dict) -> dict:
    """The text model's settings (under `text_config`, as in Qwen3.5 releases)."""
    return release_config["text_config"]


@pytest.fixture(scope="module")
def hf_tensors() -> dict[str, np.ndarray]:
    raw = _read_safetensors(HF_DIR / "model.safetensors")
    assert {item["dtype"] for item in raw.values()} == {"BF16"}
    return {name: _to_float32(t["dtype"], t["data"], t["shape"]) for name, t in raw.items()}


@pytest.fixture(scope="module")
def gguf_reader() -> gguf.GGUFReader:
    return gguf.GGUFReader(GGUF_PATH)


@pytest.fixture(scope="module")
def llama() -> Llama:
    load_installed()  # a portable llama.cpp's CPU variant, as the app loads it
    return Llama(str(GGUF_PATH), n_ctx=1024, verbose=False, seed=0)


def test_every_artifact_is_present_and_within_the_size_limit() -> None:
    expected = [
        GGUF_PATH,
        HF_DIR / "model.safetensors",
        HF_DIR / "config.json",
        HF_DIR / "tokenizer.json",
        HF_DIR / "tokenizer_config.json",
        FP8_DIR / "model.safetensors.index.json",
        MODELS / "MODEL_CARD.md",
        MODELS / "training_report.json",
    ]
    assert [str(p) for p in expected if not p.is_file()] == []
    oversized = {
        str(p): p.stat().st_size
        for p in MODELS.rglob("*")
        if p.is_file() and p.stat().st_size > MAX_FILE_BYTES
    }
    assert oversized == {}


def test_the_app_finds_the_demo_model_where_it_ships() -> None:
    assert demo_model_path() == GGUF_PATH
    assert MODELS_DIR == MODELS


def test_the_report_and_card_describe_exactly_the_shipped_files() -> None:
    report = json.loads((MODELS / "training_report.json").read_text())
    listed = {entry["path"]: entry for entry in report["files"]}
    assert "demo-mtp.gguf" in listed and "demo-mtp-hf/model.safetensors" in listed
    for path, entry in listed.items():
        data = (MODELS / path).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (entry["bytes"], entry["sha256"]), (
            path
        )
    card = (MODELS / "MODEL_CARD.md").read_text()
    trunk_loss = f"{report['held_out']['trunk_loss']:.3f}"
    assert trunk_loss in card, "the card does not state the measured held-out loss"


def test_hf_checkpoint_is_a_qwen35_release_with_one_mtp_layer(
    release_config: dict, config: dict, hf_tensors: dict[str, np.ndarray]
) -> None:
    assert release_config["model_type"] == "qwen3_5"
    assert release_config["architectures"] == ["Qwen3_5ForCausalLM"]
    assert config["model_type"] == "qwen3_5_text"
    assert config["mtp_num_hidden_layers"] == 1
    assert set(config["layer_types"]) == {"linear_attention", "full_attention"}
    mtp_names = {name for name in hf_tensors if name.startswith("mtp.")}
    assert mtp_names == EXPECTED_MTP_NAMES
    hidden = config["hidden_size"]
    assert hf_tensors["mtp.fc.weight"].shape == (hidden, 2 * hidden)
    assert hf_tensors["model.embed_tokens.weight"].shape == (config["vocab_size"], hidden)
    trunk_layers = {
        int(name.split(".")[2]) for name in hf_tensors if name.startswith("model.layers.")
    }
    assert trunk_layers == set(range(config["num_hidden_layers"]))


def test_hf_norms_are_stored_as_offsets_from_one(hf_tensors: dict[str, np.ndarray]) -> None:
    """Qwen computes x·(1+w): offset-style norms average near 0. Only the gated-delta-net's own
    `linear_attn.norm` multiplies by w directly and averages near 1."""
    offset_norms = {
        name: float(w.mean())
        for name, w in hf_tensors.items()
        if "norm" in name.split(".")[-2] and not name.endswith("linear_attn.norm.weight")
    }
    absolute_norms = {
        name: float(w.mean())
        for name, w in hf_tensors.items()
        if name.endswith("linear_attn.norm.weight")
    }
    assert {n for n in offset_norms if n.startswith("mtp.")} >= {
        "mtp.norm.weight",
        "mtp.pre_fc_norm_embedding.weight",
        "mtp.pre_fc_norm_hidden.weight",
    }
    assert absolute_norms, "no gated-delta-net layer found"
    assert {n: m for n, m in offset_norms.items() if abs(m) > 0.5} == {}
    assert {n: m for n, m in absolute_norms.items() if abs(m - 1) > 0.5} == {}


def _field(reader: gguf.GGUFReader, key: str):
    assert key in reader.fields, f"GGUF metadata {key} is missing"
    return reader.fields[key].contents()


def test_gguf_is_qwen35_with_a_nextn_block_after_the_trunk(
    gguf_reader: gguf.GGUFReader, config: dict
) -> None:
    trunk = config["num_hidden_layers"]
    assert _field(gguf_reader, "general.architecture") == "qwen35"
    assert _field(gguf_reader, "qwen35.nextn_predict_layers") == 1
    assert _field(gguf_reader, "qwen35.block_count") == trunk + 1
    recurrent = _field(gguf_reader, "qwen35.attention.recurrent_layers")
    assert recurrent == [t == "linear_attention" for t in config["layer_types"]] + [False]
    names = {tensor.name for tensor in gguf_reader.tensors}
    nextn = {
        f"blk.{trunk}.nextn.{part}.weight"
        for part in ("eh_proj", "enorm", "hnorm", "shared_head_norm")
    }
    assert nextn <= names
    assert f"blk.{trunk}.attn_q.weight" in names
    assert not any(name.startswith(f"blk.{trunk + 1}.") for name in names)


def test_gguf_tokenizer_is_qwen35_bpe_with_the_chat_template(gguf_reader: gguf.GGUFReader) -> None:
    assert _field(gguf_reader, "tokenizer.ggml.model") == "gpt2"
    assert _field(gguf_reader, "tokenizer.ggml.pre") == "qwen35"
    tokens = _field(gguf_reader, "tokenizer.ggml.tokens")
    assert tokens[_field(gguf_reader, "tokenizer.ggml.eos_token_id")] == "<|im_end|>"
    template = _field(gguf_reader, "tokenizer.chat_template")
    assert "<|im_start|>" in template and "add_generation_prompt" in template


def _gguf_tensor(reader: gguf.GGUFReader, name: str) -> gguf.ReaderTensor:
    return next(t for t in reader.tensors if t.name == name)


def test_gguf_holds_the_checkpoints_weights_with_norms_made_absolute(
    gguf_reader: gguf.GGUFReader, hf_tensors: dict[str, np.ndarray], config: dict
) -> None:
    """llama.cpp multiplies by w, so every Qwen norm must arrive as 1 + w (forgetting it is the
    classic ~0%-acceptance bug) — norms are F32, so exactly; matrices are the checkpoint's up to
    Q8_0 rounding (blocks of 32 sharing an F16 scale of amax/127)."""
    mtp_block = config["num_hidden_layers"]
    norms = {
        "output_norm.weight": "model.norm.weight",
        "blk.0.attn_norm.weight": "model.layers.0.input_layernorm.weight",
        f"blk.{mtp_block}.nextn.enorm.weight": "mtp.pre_fc_norm_embedding.weight",
        f"blk.{mtp_block}.nextn.hnorm.weight": "mtp.pre_fc_norm_hidden.weight",
        f"blk.{mtp_block}.nextn.shared_head_norm.weight": "mtp.norm.weight",
        f"blk.{mtp_block}.attn_q_norm.weight": "mtp.layers.0.self_attn.q_norm.weight",
    }
    for gguf_name, hf_name in norms.items():
        tensor = _gguf_tensor(gguf_reader, gguf_name)
        assert tensor.tensor_type == gguf.GGMLQuantizationType.F32, gguf_name
        np.testing.assert_array_equal(tensor.data, hf_tensors[hf_name] + 1.0, err_msg=gguf_name)
    matrices = {
        "token_embd.weight": "model.embed_tokens.weight",
        "output.weight": "lm_head.weight",
        f"blk.{mtp_block}.nextn.eh_proj.weight": "mtp.fc.weight",
        f"blk.{mtp_block}.ffn_down.weight": "mtp.layers.0.mlp.down_proj.weight",
    }
    for gguf_name, hf_name in matrices.items():
        tensor = _gguf_tensor(gguf_reader, gguf_name)
        expected = hf_tensors[hf_name]
        actual = gguf.quants.dequantize(tensor.data, tensor.tensor_type).reshape(expected.shape)
        blocks = np.abs(expected).reshape(-1, 32).max(axis=1, keepdims=True)
        error = np.abs(actual - expected).reshape(-1, 32)
        # half a quantisation step, plus the F16 rounding of the block's scale (2^-11 · amax)
        assert (error <= blocks / 254 + blocks / 2048 + 1e-7).all(), gguf_name


def test_llama_cpp_tokenizes_exactly_as_the_hf_tokenizer_did(llama: Llama) -> None:
    probes = json.loads((MODELS / "tokenizer_probes.json").read_text())
    assert len(probes) >= 5
    for probe in probes:
        tokens = llama.tokenize(probe["text"].encode(), add_bos=False, special=True)
        assert tokens == probe["ids"], probe["text"]


def _chat_prompt(llama: Llama, request: str) -> list[int]:
    text = f"<|im_start|>user\n{request}<|im_end|>\n<|im_start|>assistant\n"
    return llama.tokenize(text.encode(), add_bos=False, special=True)


def test_llama_cpp_answers_a_request_with_python_code(llama: Llama) -> None:
    prompt = _chat_prompt(llama, "Return the sum of the squares of the numbers in a list.")
    im_end = llama.tokenize(b"<|im_end|>", add_bos=False, special=True)[0]
    generated: list[int] = []
    for token in llama.generate(prompt, top_k=1, temp=0.0, reset=True):
        if token == im_end or len(generated) == 120:
            break
        generated.append(token)
    text = llama.detokenize(generated).decode("utf-8", errors="replace")
    assert text.startswith("```python\n"), text
    assert "def " in text and "(" in text and ":" in text, text


def test_the_shipped_mtp_head_drafts_well_in_the_apps_llama_cpp_backend() -> None:
    """What the demo exists for: with its nextn block loaded by llama.cpp, the head's greedy drafts
    are accepted most of the time, and speculative output equals plain decoding. A conversion
    slip (a norm without its +1, a mis-mapped projection) would leave the output exact but drop
    acceptance to near zero."""
    backend = LlamaCppBackend(GGUF_PATH, LoadSettings(threads=1, context_length=1024))
    try:
        assert backend.info.mtp_available, backend.info.mtp_unavailable_reason
        drafted = accepted = 0
        for request_text in ACCEPTANCE_REQUESTS:
            messages = (ChatMessage("user", request_text),)
            results = [
                generate(
                    backend,
                    GenerationRequest(messages=messages, max_tokens=64, mtp_depth=depth),
                    emit=lambda _chunk: None,
                    cancelled=lambda: False,
                )
                for depth in (0, 1)
            ]
            assert results[1].token_ids == results[0].token_ids
            drafted += results[1].stats.drafted_by_depth[0]
            accepted += results[1].stats.accepted_by_depth[0]
    finally:
        backend.close()
    assert drafted >= 40
    assert accepted / drafted >= MIN_DEPTH1_ACCEPTANCE, f"{accepted}/{drafted}"


def test_fp8_release_is_sharded_with_block_scales() -> None:
    fp8_config = json.loads((FP8_DIR / "config.json").read_text())
    assert fp8_config["quantization_config"]["weight_block_size"] == [128, 128]
    index = json.loads((FP8_DIR / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) >= 2
    stored: dict[str, dict] = {}
    for shard in shards:
        stored.update(_read_safetensors(FP8_DIR / shard))
    assert set(stored) == set(index["weight_map"])
    quantised = {name for name, t in stored.items() if t["dtype"] == "F8_E4M3"}
    assert EXPECTED_MTP_NAMES - quantised == {
        "mtp.pre_fc_norm_embedding.weight",
        "mtp.pre_fc_norm_hidden.weight",
        "mtp.norm.weight",
        "mtp.layers.0.input_layernorm.weight",
        "mtp.layers.0.post_attention_layernorm.weight",
        "mtp.layers.0.self_attn.q_norm.weight",
        "mtp.layers.0.self_attn.k_norm.weight",
    }
    for name in quantised:
        rows, cols = stored[name]["shape"]
        scale = stored[f"{name}_scale_inv"]
        assert scale["dtype"] == "F32", name
        assert scale["shape"] == [math.ceil(rows / 128), math.ceil(cols / 128)], name


def test_fp8_release_dequantises_through_the_extractor_to_the_checkpoint(
    tmp_path: Path, hf_tensors: dict[str, np.ndarray]
) -> None:
    """What a sidecar user gets from the 'original release' is the checkpoint's head, up to FP8
    precision: E4M3 keeps 3 mantissa bits (relative error ≤ 2^-4), tiles share one scale."""
    out = tmp_path / "mtp.safetensors"
    result = extract_mtp(LocalFolderSource(FP8_DIR), out)
    assert result.layout == "qwen-mtp"
    sidecar = {
        name: _to_float32(t["dtype"], t["data"], t["shape"])
        for name, t in _read_safetensors(out).items()
    }
    assert set(sidecar) == EXPECTED_MTP_NAMES
    for name, extracted in sidecar.items():
        original = hf_tensors[name]
        assert extracted.shape == original.shape, name
        if name.endswith("norm.weight"):
            np.testing.assert_array_equal(extracted, original, err_msg=name)
            continue
        tile_max = np.abs(original).max()
        bound = np.abs(original) * 2.0**-4 + tile_max / 448 * 2.0**-9 + np.abs(original) * 2.0**-8
        assert (np.abs(extracted - original) <= bound).all(), name
        relative = np.linalg.norm(extracted - original) / np.linalg.norm(original)
        assert relative < 0.04, (name, relative)
