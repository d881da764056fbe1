"""Synthetic checkpoints of every MTP layout, for extractor tests and Hub tests that upload them.

Each builder writes a small but faithful checkpoint with the real ``safetensors`` library: real key
names and dtypes of the family, shapes scaled down (with partial edge tiles), a ``config.json``,
and shards with a ``model.safetensors.index.json`` (or a single ``model.safetensors``). Quantised
weights are produced by the reference formulas — DeepSeek: s = amax/448 per 128×128 tile,
q = fp8(x/s), s stored as ``_scale_inv`` — so a test can compare the extracted BF16 both with the
original values and, bit for bit, with an independent decoder (tests/mtp/reference.py).

Usage from any test: ``build_deepseek_v3(tmp_path / "ckpt")`` → :class:`SyntheticCheckpoint`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import safetensors

INDEX_FILE = "model.safetensors.index.json"
_SPEC_DTYPE = {
    "BF16": "bfloat16",
    "F16": "float16",
    "F32": "float32",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E8M0": "float8_e8m0fnu",
    "I8": "int8",
}


@dataclass(frozen=True)
class Quant:
    """How a weight is quantised: code dtype, scale dtype and naming, 2D tile or 1D block."""

    code: str  # "F8_E4M3" | "I8"
    scale_dtype: str  # "F32" | "BF16" | "F8_E8M0"
    scale_suffix: str  # "_scale_inv" | "_scale" | ".scale"
    tile: int | None = None
    block: int | None = None

    def scale_name(self, weight: str) -> str:
        if self.scale_suffix == ".scale":
            return weight.removesuffix(".weight") + ".scale"
        return weight + self.scale_suffix


@dataclass(frozen=True)
class Spec:
    """One tensor to generate: ``kind`` picks the value distribution."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # stored dtype of the tensor (or code dtype when quantised)
    kind: str = "weight"  # "weight" | "norm" | "offset_norm" | "bias"
    quant: Quant | None = None


@dataclass(frozen=True)
class StoredQuant:
    """What a quantised weight looks like on disk (for the independent reference decoder)."""

    quant: Quant
    codes: np.ndarray  # uint8 codes, weight shape
    scales: np.ndarray  # float32 scale values (E8M0 decoded), flat, one per block/tile
    scale_raw: bytes  # the scale tensor's stored bytes


@dataclass(frozen=True)
class SyntheticCheckpoint:
    folder: Path
    layout: str
    layer_indices: tuple[int, ...]
    mtp_names: tuple[str, ...]
    """Names the sidecar must contain (scale companions excluded), sorted."""
    scale_names: tuple[str, ...]
    originals: Mapping[str, np.ndarray] = field(repr=False)
    """float32 values of each MTP output tensor before quantisation (exact for plain dtypes)."""
    stored: Mapping[str, bytes] = field(repr=False)
    """Stored bytes of every tensor of the checkpoint, by name."""
    quantised: Mapping[str, StoredQuant] = field(repr=False)
    dtypes: Mapping[str, str] = field(repr=False)
    shard_of: Mapping[str, str] = field(repr=False)

    @property
    def bytes_needed(self) -> int:
        return sum(len(self.stored[n]) for n in (*self.mtp_names, *self.scale_names))

    @property
    def shard_files(self) -> tuple[Path, ...]:
        return tuple(self.folder / s for s in sorted(set(self.shard_of.values())))


# ---------------------------------------------------------------------------------------------
# Reference number formats (built from their definitions, independent of app.engine.mtp)


def fp8_e4m3_value(code: int) -> float:
    sign = -1.0 if code & 0x80 else 1.0
    exponent, mantissa = (code >> 3) & 0x0F, code & 0x07
    if exponent == 0x0F and mantissa == 0x07:
        return math.nan
    if exponent == 0:
        return sign * mantissa / 8 * 2.0**-6
    return sign * (1 + mantissa / 8) * 2.0 ** (exponent - 7)


_FP8_POSITIVE = np.array([fp8_e4m3_value(c) for c in range(0x7F)], dtype=np.float64)


def encode_fp8_e4m3(values: np.ndarray) -> np.ndarray:
    """Round float values to the nearest E4M3 code (ties to even code), saturating at ±448."""
    magnitude = np.minimum(np.abs(values.astype(np.float64)), 448.0)
    upper = np.clip(np.searchsorted(_FP8_POSITIVE, magnitude), 1, 0x7E)
    lower = upper - 1
    to_lower = magnitude - _FP8_POSITIVE[lower]
    to_upper = _FP8_POSITIVE[upper] - magnitude
    pick_upper = (to_upper < to_lower) | ((to_upper == to_lower) & (upper % 2 == 0))
    codes = np.where(pick_upper, upper, lower).astype(np.uint8)
    return codes | np.where(np.signbit(values) & (codes != 0), 0x80, 0).astype(np.uint8)


def to_bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 → BF16 bits, round to nearest even (vectorised; used to make BF16 test data)."""
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def from_bf16_bits(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


# ---------------------------------------------------------------------------------------------
# Quantisers (the reference formulas)


def _block_view_scales(values: np.ndarray, quant: Quant, amax_per_scale: Callable) -> np.ndarray:
    """One scale per tile/block from the block's absolute maximum."""
    if quant.tile:
        rows, cols = values.shape
        t = quant.tile
        grid = (math.ceil(rows / t), math.ceil(cols / t))
        padded = np.zeros((grid[0] * t, grid[1] * t), dtype=np.float32)
        padded[:rows, :cols] = np.abs(values)
        amax = padded.reshape(grid[0], t, grid[1], t).max(axis=(1, 3))
    else:
        assert quant.block
        amax = np.abs(values).reshape(-1, quant.block).max(axis=1)
    return amax_per_scale(amax.astype(np.float32)).ravel()


def _broadcast(scales: np.ndarray, shape: tuple[int, ...], quant: Quant) -> np.ndarray:
    if quant.tile:
        rows, cols = shape
        t = quant.tile
        grid = scales.reshape(math.ceil(rows / t), math.ceil(cols / t))
        return np.repeat(np.repeat(grid, t, axis=0), t, axis=1)[:rows, :cols]
    assert quant.block
    return np.repeat(scales, quant.block).reshape(shape)


def quantise(values: np.ndarray, quant: Quant) -> StoredQuant:
    limit = 448.0 if quant.code == "F8_E4M3" else 127.0

    def scale_from_amax(amax: np.ndarray) -> np.ndarray:
        safe = np.where(amax > 0, amax, limit).astype(np.float32)
        if quant.scale_dtype == "F8_E8M0":
            return np.exp2(np.ceil(np.log2(safe / limit))).astype(np.float32)
        scale = (safe / np.float32(limit)).astype(np.float32)  # DeepSeek: s = amax / 448
        if quant.scale_dtype == "BF16":
            scale = from_bf16_bits(to_bf16_bits(scale))
        return scale

    scales = _block_view_scales(values, quant, scale_from_amax)
    divided = values / _broadcast(scales, values.shape, quant)  # q = x / s
    if quant.code == "F8_E4M3":
        codes = encode_fp8_e4m3(divided)
    else:
        codes = np.clip(np.rint(divided), -127, 127).astype(np.int8).view(np.uint8)
    if quant.scale_dtype == "F8_E8M0":
        raw = (np.log2(scales).astype(np.int64) + 127).astype(np.uint8).tobytes()
    elif quant.scale_dtype == "BF16":
        raw = to_bf16_bits(scales).tobytes()
    else:
        raw = scales.astype("<f4").tobytes()
    return StoredQuant(quant, codes, scales, raw)


# ---------------------------------------------------------------------------------------------
# Value generation and file writing


def _values(spec: Spec, rng: np.random.Generator) -> np.ndarray:
    if spec.kind == "norm":
        return (1.0 + 0.05 * rng.standard_normal(spec.shape)).astype(np.float32)
    if spec.kind == "offset_norm":  # Qwen stores RMSNorm weights as offsets from 1
        return (0.05 * rng.standard_normal(spec.shape)).astype(np.float32)
    if spec.kind == "bias":
        return (0.01 * rng.standard_normal(spec.shape)).astype(np.float32)
    values = 0.02 * rng.standard_normal(spec.shape)
    if len(spec.shape) >= 2:  # rows of very different magnitude, so scales differ per tile
        magnitude = np.exp2(rng.integers(-6, 4, size=spec.shape[0])).reshape(-1, 1)
        values = values * magnitude.reshape((-1,) + (1,) * (len(spec.shape) - 1))
    flat = values.reshape(-1)
    flat[:: max(1, flat.size // 7)] = 0.0  # exact zeros
    return values.astype(np.float32)


def _encode_plain(values: np.ndarray, dtype: str) -> tuple[bytes, np.ndarray]:
    """Stored bytes of a plain tensor, and the float32 values those bytes hold exactly."""
    if dtype == "BF16":
        bits = to_bf16_bits(values)
        return bits.tobytes(), from_bf16_bits(bits)
    if dtype == "F16":
        half = values.astype(np.float16)
        return half.tobytes(), half.astype(np.float32)
    return values.astype("<f4").tobytes(), values.astype(np.float32)


def write_shard(path: Path, tensors: Mapping[str, tuple[str, tuple[int, ...], bytes]]) -> None:
    buffers = {name: np.frombuffer(data, dtype=np.uint8) for name, (_, _, data) in tensors.items()}
    specs = {
        name: safetensors.TensorSpec(
            dtype=_SPEC_DTYPE[dtype],
            shape=list(shape),
            data_ptr=buffers[name].ctypes.data if len(data) else 0,
            data_len=len(data),
        )
        for name, (dtype, shape, data) in tensors.items()
    }
    safetensors.serialize_file(specs, str(path), metadata={"format": "pt"})


def write_checkpoint(
    folder: Path,
    *,
    layout: str,
    layer_indices: tuple[int, ...],
    config: Mapping[str, object],
    trunk: Sequence[Spec],
    mtp: Sequence[Spec],
    shards: int = 3,
    single_file: bool = False,
    seed: int = 0,
) -> SyntheticCheckpoint:
    """Generate values for ``trunk`` + ``mtp``, quantise, and write shards, index and config."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    stored: dict[str, tuple[str, tuple[int, ...], bytes]] = {}
    originals: dict[str, np.ndarray] = {}
    quantised: dict[str, StoredQuant] = {}
    scale_names: list[str] = []
    for spec in (*trunk, *mtp):
        values = _values(spec, rng)
        if spec.quant is None:
            data, exact = _encode_plain(values, spec.dtype)
            stored[spec.name] = (spec.dtype, spec.shape, data)
            originals[spec.name] = exact
            continue
        result = quantise(values, spec.quant)
        scale_name = spec.quant.scale_name(spec.name)
        scale_count = result.scales.size
        scale_shape = (
            (math.ceil(spec.shape[0] / spec.quant.tile), math.ceil(spec.shape[1] / spec.quant.tile))
            if spec.quant.tile
            else (scale_count,)
        )
        stored[spec.name] = (spec.quant.code, spec.shape, result.codes.tobytes())
        stored[scale_name] = (spec.quant.scale_dtype, scale_shape, result.scale_raw)
        originals[spec.name] = values
        quantised[spec.name] = result
        if spec in mtp:
            scale_names.append(scale_name)

    mtp_names = sorted(spec.name for spec in mtp)
    shard_of = _assign_shards(list(stored), set(mtp_names) | set(scale_names), shards, single_file)
    for shard in sorted(set(shard_of.values())):
        write_shard(folder / shard, {n: stored[n] for n in stored if shard_of[n] == shard})
    if not single_file:
        total = sum(len(data) for _, _, data in stored.values())
        index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(shard_of.items()))}
        (folder / INDEX_FILE).write_text(json.dumps(index, indent=2))
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    return SyntheticCheckpoint(
        folder=folder,
        layout=layout,
        layer_indices=layer_indices,
        mtp_names=tuple(mtp_names),
        scale_names=tuple(sorted(scale_names)),
        originals={n: originals[n] for n in mtp_names},
        stored={name: data for name, (_, _, data) in stored.items()},
        quantised={n: quantised[n] for n in mtp_names if n in quantised},
        dtypes={name: dtype for name, (dtype, _, _) in stored.items()},
        shard_of=shard_of,
    )


def _assign_shards(
    names: list[str], mtp: set[str], shards: int, single_file: bool
) -> dict[str, str]:
    """Trunk in the first shards, MTP tensors split over the last two (as real releases do)."""
    if single_file:
        return dict.fromkeys(names, "model.safetensors")

    def shard(i: int) -> str:
        return f"model-{i:05d}-of-{shards:05d}.safetensors"

    trunk = [n for n in names if n not in mtp]
    heads = sorted(mtp)
    assignment = {n: shard(1 + i * (shards - 1) // max(1, len(trunk))) for i, n in enumerate(trunk)}
    half = len(heads) // 2
    for i, name in enumerate(heads):
        assignment[name] = shard(shards - 1 if i < half and shards > 1 else shards)
    return assignment


# ---------------------------------------------------------------------------------------------
# The families of docs/formats.md#layouts-in-a-checkpoint

DEEPSEEK_FP8 = Quant("F8_E4M3", "F32", "_scale_inv", tile=128)
QWEN_FP8 = Quant("F8_E4M3", "BF16", "_scale_inv", tile=128)
MX_FP8 = Quant("F8_E4M3", "F8_E8M0", ".scale", tile=128)


def _qwen_decoder_layer(prefix: str, hidden: int, ffn: int, quant: Quant | None) -> list[Spec]:
    dtype = quant.code if quant else "BF16"
    heads, kv_heads, head_dim = 4, 2, 40
    return [
        Spec(
            f"{prefix}.self_attn.q_proj.weight", (2 * heads * head_dim, hidden), dtype, quant=quant
        ),
        Spec(
            f"{prefix}.self_attn.k_proj.weight", (kv_heads * head_dim, hidden), dtype, quant=quant
        ),
        Spec(
            f"{prefix}.self_attn.v_proj.weight", (kv_heads * head_dim, hidden), dtype, quant=quant
        ),
        Spec(f"{prefix}.self_attn.o_proj.weight", (hidden, heads * head_dim), dtype, quant=quant),
        Spec(f"{prefix}.self_attn.q_norm.weight", (head_dim,), "BF16", "offset_norm"),
        Spec(f"{prefix}.self_attn.k_norm.weight", (head_dim,), "BF16", "offset_norm"),
        Spec(f"{prefix}.input_layernorm.weight", (hidden,), "BF16", "offset_norm"),
        Spec(f"{prefix}.post_attention_layernorm.weight", (hidden,), "BF16", "offset_norm"),
        Spec(f"{prefix}.mlp.gate_proj.weight", (ffn, hidden), dtype, quant=quant),
        Spec(f"{prefix}.mlp.up_proj.weight", (ffn, hidden), dtype, quant=quant),
        Spec(f"{prefix}.mlp.down_proj.weight", (hidden, ffn), dtype, quant=quant),
    ]


def build_qwen35(
    folder: Path, *, fp8: bool = False, single_file: bool = False, seed: int = 1
) -> SyntheticCheckpoint:
    """Qwen3.5/3.6 dense: trunk under ``model.language_model``, 15 ``mtp.*`` tensors.

    BF16 like the original release, or ``fp8=True`` like the ``-FP8`` releases (E4M3 with BF16
    ``weight_scale_inv`` per 128×128 tile). ``mtp_num_hidden_layers`` sits under ``text_config``.
    """
    hidden, ffn, layers, vocab = 160, 352, 2, 300
    quant = QWEN_FP8 if fp8 else None
    trunk = [Spec("model.language_model.embed_tokens.weight", (vocab, hidden), "BF16")]
    for i in range(layers):
        trunk += _qwen_decoder_layer(f"model.language_model.layers.{i}", hidden, ffn, quant)
    trunk += [
        Spec("model.language_model.norm.weight", (hidden,), "BF16", "offset_norm"),
        Spec("lm_head.weight", (vocab, hidden), "BF16"),
    ]
    mtp = [
        Spec("mtp.fc.weight", (hidden, 2 * hidden), quant.code if quant else "BF16", quant=quant),
        Spec("mtp.pre_fc_norm_embedding.weight", (hidden,), "BF16", "offset_norm"),
        Spec("mtp.pre_fc_norm_hidden.weight", (hidden,), "BF16", "offset_norm"),
        Spec("mtp.norm.weight", (hidden,), "BF16", "offset_norm"),
        *_qwen_decoder_layer("mtp.layers.0", hidden, ffn, quant),
    ]
    config = {
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "model_type": "qwen3_5",
        "text_config": {
            "model_type": "qwen3_5_text",
            "hidden_size": hidden,
            "intermediate_size": ffn,
            "num_hidden_layers": layers,
            "mtp_num_hidden_layers": 1,
            "vocab_size": vocab,
        },
    }
    return write_checkpoint(
        folder,
        layout="qwen-mtp",
        layer_indices=(0,),
        config=config,
        trunk=trunk,
        mtp=mtp,
        single_file=single_file,
        seed=seed,
    )


def _deepseek_layer(prefix: str, hidden: int, quant: Quant | None, experts: int) -> list[Spec]:
    """A DeepSeek V3 decoder block (MLA attention, MoE) at small scale."""
    dtype = quant.code if quant else "BF16"
    q_lora, kv_lora, rope, heads, nope, v_dim, moe_ffn = 96, 64, 16, 4, 32, 32, 72
    specs = [
        Spec(f"{prefix}.input_layernorm.weight", (hidden,), "BF16", "norm"),
        Spec(f"{prefix}.post_attention_layernorm.weight", (hidden,), "BF16", "norm"),
        Spec(f"{prefix}.self_attn.q_a_proj.weight", (q_lora, hidden), dtype, quant=quant),
        Spec(f"{prefix}.self_attn.q_a_layernorm.weight", (q_lora,), "BF16", "norm"),
        Spec(
            f"{prefix}.self_attn.q_b_proj.weight",
            (heads * (nope + rope), q_lora),
            dtype,
            quant=quant,
        ),
        Spec(
            f"{prefix}.self_attn.kv_a_proj_with_mqa.weight",
            (kv_lora + rope, hidden),
            dtype,
            quant=quant,
        ),
        Spec(f"{prefix}.self_attn.kv_a_layernorm.weight", (kv_lora,), "BF16", "norm"),
        Spec(
            f"{prefix}.self_attn.kv_b_proj.weight",
            (heads * (nope + v_dim), kv_lora),
            dtype,
            quant=quant,
        ),
        Spec(f"{prefix}.self_attn.o_proj.weight", (hidden, heads * v_dim), dtype, quant=quant),
        Spec(f"{prefix}.mlp.gate.weight", (experts, hidden), "BF16"),
        Spec(f"{prefix}.mlp.gate.e_score_correction_bias", (experts,), "F32", "bias"),
    ]
    for expert in [f"experts.{e}" for e in range(experts)] + ["shared_experts"]:
        specs += [
            Spec(f"{prefix}.mlp.{expert}.gate_proj.weight", (moe_ffn, hidden), dtype, quant=quant),
            Spec(f"{prefix}.mlp.{expert}.up_proj.weight", (moe_ffn, hidden), dtype, quant=quant),
            Spec(f"{prefix}.mlp.{expert}.down_proj.weight", (hidden, moe_ffn), dtype, quant=quant),
        ]
    return specs


def _nextn_block(prefix: str, hidden: int, vocab: int, quant: Quant | None) -> list[Spec]:
    dtype = quant.code if quant else "BF16"
    return [
        Spec(f"{prefix}.embed_tokens.weight", (vocab, hidden), "BF16"),
        Spec(f"{prefix}.enorm.weight", (hidden,), "BF16", "norm"),
        Spec(f"{prefix}.hnorm.weight", (hidden,), "BF16", "norm"),
        Spec(f"{prefix}.eh_proj.weight", (hidden, 2 * hidden), dtype, quant=quant),
        Spec(f"{prefix}.shared_head.norm.weight", (hidden,), "BF16", "norm"),
        Spec(f"{prefix}.shared_head.head.weight", (vocab, hidden), "BF16"),
        *_deepseek_layer(prefix, hidden, quant, experts=4),
    ]


def build_deepseek_v3(
    folder: Path,
    *,
    nextn_layers: int = 1,
    config_in_text_config: bool = False,
    single_file: bool = False,
    seed: int = 2,
) -> SyntheticCheckpoint:
    """DeepSeek V3/R1: FP8 E4M3 with F32 ``weight_scale_inv`` per 128×128 tile (s = amax/448),
    NextN layers ``model.layers.{num_hidden_layers + i}`` declared by ``num_nextn_predict_layers``.

    ``config_in_text_config`` moves the layer counts under ``text_config`` (as multimodal
    wrappers do); ``nextn_layers=2`` checks that every NextN layer is taken, not only the first.
    """
    hidden, vocab, layers = 200, 320, 3
    trunk = [Spec("model.embed_tokens.weight", (vocab, hidden), "BF16")]
    for i in range(layers):
        trunk += _deepseek_layer(f"model.layers.{i}", hidden, DEEPSEEK_FP8, experts=2)[:9]
    trunk += [
        Spec("model.norm.weight", (hidden,), "BF16", "norm"),
        Spec("lm_head.weight", (vocab, hidden), "BF16"),
    ]
    mtp: list[Spec] = []
    for i in range(nextn_layers):
        mtp += _nextn_block(f"model.layers.{layers + i}", hidden, vocab, DEEPSEEK_FP8)
    counts = {
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_nextn_predict_layers": nextn_layers,
        "vocab_size": vocab,
    }
    config: dict[str, object] = {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "quantization_config": {
            "quant_method": "fp8",
            "fmt": "e4m3",
            "activation_scheme": "dynamic",
            "weight_block_size": [128, 128],
        },
    }
    if config_in_text_config:
        config["text_config"] = counts
    else:
        config.update(counts)
    return write_checkpoint(
        folder,
        layout="deepseek-nextn",
        layer_indices=tuple(range(layers, layers + nextn_layers)),
        config=config,
        trunk=trunk,
        mtp=mtp,
        shards=4,
        single_file=single_file,
        seed=seed,
    )


def build_glm45(folder: Path, *, seed: int = 3) -> SyntheticCheckpoint:
    """GLM-4.5: BF16, NextN layer ``model.layers.{num_hidden_layers}`` (92 in the real model)."""
    hidden, vocab, layers = 192, 256, 4
    trunk = [Spec("model.embed_tokens.weight", (vocab, hidden), "BF16")]
    for i in range(layers):
        trunk += _deepseek_layer(f"model.layers.{i}", hidden, None, experts=2)[:4]
    trunk += [Spec("lm_head.weight", (vocab, hidden), "BF16")]
    mtp = _nextn_block(f"model.layers.{layers}", hidden, vocab, None)
    config = {
        "architectures": ["Glm4MoeForCausalLM"],
        "model_type": "glm4_moe",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_nextn_predict_layers": 1,
        "vocab_size": vocab,
    }
    return write_checkpoint(
        folder,
        layout="deepseek-nextn",
        layer_indices=(layers,),
        config=config,
        trunk=trunk,
        mtp=mtp,
        seed=seed,
    )


def build_mimo(folder: Path, *, single_file: bool = False, seed: int = 4) -> SyntheticCheckpoint:
    """MiMo-7B: BF16, ``model.mtp_layers.{i}.*`` (config also sets num_nextn_predict_layers)."""
    hidden, ffn, vocab, layers = 128, 256, 256, 2
    trunk = [Spec("model.embed_tokens.weight", (vocab, hidden), "BF16")]
    for i in range(layers):
        trunk += _qwen_decoder_layer(f"model.layers.{i}", hidden, ffn, None)[:4]
    trunk += [
        Spec("model.norm.weight", (hidden,), "BF16", "norm"),
        Spec("lm_head.weight", (vocab, hidden), "BF16"),
    ]
    prefix = "model.mtp_layers.0"
    mtp = [
        Spec(f"{prefix}.token_layernorm.weight", (hidden,), "BF16", "norm"),
        Spec(f"{prefix}.hidden_layernorm.weight", (hidden,), "BF16", "norm"),
        Spec(f"{prefix}.input_proj.weight", (hidden, 2 * hidden), "BF16"),
        Spec(f"{prefix}.final_layernorm.weight", (hidden,), "BF16", "norm"),
        Spec(f"{prefix}.self_attn.q_proj.bias", (hidden,), "BF16", "bias"),
        Spec(f"{prefix}.self_attn.k_proj.bias", (hidden // 2,), "BF16", "bias"),
        Spec(f"{prefix}.self_attn.v_proj.bias", (hidden // 2,), "BF16", "bias"),
        *[s for s in _qwen_decoder_layer(prefix, hidden, ffn, None) if "_norm" not in s.name],
    ]
    config = {
        "architectures": ["MiMoForCausalLM"],
        "model_type": "mimo",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_nextn_predict_layers": 1,
        "vocab_size": vocab,
    }
    return write_checkpoint(
        folder,
        layout="mimo",
        layer_indices=(0,),
        config=config,
        trunk=trunk,
        mtp=mtp,
        single_file=single_file,
        seed=seed,
    )


def build_mixed_formats(folder: Path, *, seed: int = 5) -> SyntheticCheckpoint:
    """A DeepSeek-V4-style ``mtp.0.*`` checkpoint mixing every format of
    docs/formats.md#dequantisation.

    FP8 with E8M0 ``.scale`` tiles; INT8 experts with E8M0 ``_scale`` per 32 elements (1D);
    FP8 with F32 per-row scales over short rows (1D, small blocks); a fused 3D expert tensor with
    one F32 scale per expert (1D, large blocks); FP8 with BF16 ``_scale_inv`` on 64×64 tiles
    (the count matches no 128 grid); F16 and F32 pass-through tensors.
    """
    hidden = 136
    trunk = [
        Spec("embed.weight", (256, hidden), "BF16"),
        Spec("layers.0.attn.wq.weight", (hidden, hidden), "F8_E4M3", quant=MX_FP8),
        Spec("norm.weight", (hidden,), "F32", "norm"),
    ]
    mtp = [
        Spec("mtp.0.emb_norm.weight", (hidden,), "F32", "norm"),
        Spec("mtp.0.h_norm.weight", (hidden,), "F16", "norm"),
        Spec("mtp.0.proj.weight", (hidden, 2 * hidden), "F8_E4M3", quant=MX_FP8),
        Spec(
            "mtp.0.attn.wq.weight",
            (3, 1100),
            "F8_E4M3",
            quant=Quant("F8_E4M3", "F32", "_scale", block=1100),
        ),
        Spec(
            "mtp.0.attn.wkv.weight",
            (96, 200),
            "F8_E4M3",
            quant=Quant("F8_E4M3", "F32", "_scale", block=200),
        ),
        Spec(
            "mtp.0.attn.wo.weight",
            (hidden, 192),
            "F8_E4M3",
            quant=Quant("F8_E4M3", "BF16", "_scale_inv", tile=64),
        ),
        Spec(
            "mtp.0.ffn.experts.w2",
            (4, 48, 64),
            "F8_E4M3",
            quant=Quant("F8_E4M3", "F32", "_scale", block=48 * 64),
        ),
        *[
            Spec(
                f"mtp.0.ffn.experts.{e}.w1.weight",
                (64, hidden),
                "I8",
                quant=Quant("I8", "F8_E8M0", "_scale", block=32),
            )
            for e in range(2)
        ],
        Spec("mtp.0.norm.weight", (hidden,), "BF16", "norm"),
    ]
    config = {
        "architectures": ["DeepseekV4ForCausalLM"],
        "model_type": "deepseek_v4",
        "num_hidden_layers": 1,
    }
    return write_checkpoint(
        folder,
        layout="qwen-mtp",
        layer_indices=(0,),
        config=config,
        trunk=trunk,
        mtp=mtp,
        seed=seed,
    )


def build_ernie45(folder: Path, *, seed: int = 6) -> SyntheticCheckpoint:
    """ERNIE 4.5: BF16 trunk ``model.layers.{i}``, MTP layer ``i`` as ``model.mtp_emb_norm.{i}``,
    ``model.mtp_hidden_norm.{i}``, ``model.mtp_linear_proj.{i}`` and ``model.mtp_block.{i}.*``
    (vLLM's ernie_mtp.py), declared by ``num_nextn_predict_layers``."""
    hidden, ffn, vocab, layers = 128, 256, 256, 2
    trunk = [Spec("model.embed_tokens.weight", (vocab, hidden), "BF16")]
    for i in range(layers):
        trunk += _qwen_decoder_layer(f"model.layers.{i}", hidden, ffn, None)[:4]
    trunk += [
        Spec("model.norm.weight", (hidden,), "BF16", "norm"),
        Spec("lm_head.weight", (vocab, hidden), "BF16"),
    ]
    mtp = [
        Spec("model.mtp_emb_norm.0.weight", (hidden,), "BF16", "norm"),
        Spec("model.mtp_hidden_norm.0.weight", (hidden,), "BF16", "norm"),
        Spec("model.mtp_linear_proj.0.weight", (hidden, 2 * hidden), "BF16"),
        *_qwen_decoder_layer("model.mtp_block.0", hidden, ffn, None),
    ]
    config = {
        "architectures": ["Ernie4_5_MoeForCausalLM"],
        "model_type": "ernie4_5_moe",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_nextn_predict_layers": 1,
        "vocab_size": vocab,
    }
    return write_checkpoint(
        folder,
        layout="ernie-mtp",
        layer_indices=(0,),
        config=config,
        trunk=trunk,
        mtp=mtp,
        seed=seed,
    )


def build_wrapped_nextn(
    folder: Path, *, prefix: str, model_type: str, seed: int = 7
) -> SyntheticCheckpoint:
    """A multimodal wrapper of a NextN model: trunk and NextN layer under ``prefix``
    (``model.language_model.layers.`` as GLM-4.5V, ``language_model.model.layers.`` as Kimi
    K2.5), the layer counts under ``text_config``, a vision tower beside it."""
    hidden, vocab, layers = 192, 256, 3
    trunk = [
        Spec(f"{prefix.removesuffix('layers.')}embed_tokens.weight", (vocab, hidden), "BF16"),
        Spec("vision_tower.blocks.0.attn.qkv.weight", (96, 32), "BF16"),
    ]
    for i in range(layers):
        trunk += _deepseek_layer(f"{prefix}{i}", hidden, None, experts=2)[:4]
    mtp = _nextn_block(f"{prefix}{layers}", hidden, vocab, None)
    config = {
        "architectures": ["WrappedForConditionalGeneration"],
        "model_type": model_type,
        "text_config": {
            "hidden_size": hidden,
            "num_hidden_layers": layers,
            "num_nextn_predict_layers": 1,
            "vocab_size": vocab,
        },
    }
    return write_checkpoint(
        folder,
        layout="deepseek-nextn",
        layer_indices=(layers,),
        config=config,
        trunk=trunk,
        mtp=mtp,
        seed=seed,
    )


BUILDERS: Mapping[str, Callable[[Path], SyntheticCheckpoint]] = {
    "qwen35-bf16": build_qwen35,
    "qwen36-fp8": lambda folder: build_qwen35(folder, fp8=True),
    "qwen35-single-file": lambda folder: build_qwen35(folder, single_file=True),
    "deepseek-v3": build_deepseek_v3,
    "deepseek-v3-two-nextn-text-config": lambda folder: build_deepseek_v3(
        folder, nextn_layers=2, config_in_text_config=True
    ),
    "deepseek-v3-single-file": lambda folder: build_deepseek_v3(folder, single_file=True),
    "glm45": build_glm45,
    "mimo": build_mimo,
    "ernie45": build_ernie45,
    "glm45v-wrapped-nextn": lambda folder: build_wrapped_nextn(
        folder, prefix="model.language_model.layers.", model_type="glm4v_moe"
    ),
    "kimi-k25-wrapped-nextn": lambda folder: build_wrapped_nextn(
        folder, prefix="language_model.model.layers.", model_type="kimi_k25"
    ),
    "mixed-formats": build_mixed_formats,
}
"""Every synthetic checkpoint by a short name, for parametrised tests."""


def rewrite_header(shard: Path, edit: Callable[[dict], None]) -> None:
    """Apply ``edit`` to a shard's JSON header in place, keeping the data (for bad-input tests)."""
    raw = shard.read_bytes()
    length = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + length])
    edit(header)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    shard.write_bytes(len(text).to_bytes(8, "little") + text + raw[8 + length :])
