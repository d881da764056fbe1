"""Which GGUF tensor each sidecar tensor becomes, following llama.cpp's own converter.

The converter (``convert_hf_to_gguf.py``) renames a checkpoint's MTP tensors in two steps, and
this module repeats both:

1. MTP names become ordinary layer-indexed names. Qwen3.5/3.6/Next (``_QwenMtpMixin``):
   ``mtp.fc`` → ``model.layers.{T}.eh_proj``, ``mtp.pre_fc_norm_embedding`` → ``enorm``,
   ``mtp.pre_fc_norm_hidden`` → ``hnorm``, ``mtp.norm`` → ``shared_head.norm`` and
   ``mtp.layers.i.*`` → ``model.layers.{T + i}.*``, where T is the trunk's block count.
   DeepSeek/GLM NextN layers are already ``model.layers.{L}.*``; the i-th (sorted) becomes
   block T + i.
2. Layer-indexed names go through gguf-py's ``TensorNameMap`` (the converter's name table; the
   ``gguf`` package ships it), with the converter's rewrites first: per-expert tensors stacked
   into one 3-D tensor per projection, a fused ``gate_up_proj`` split, ``e_score_correction_bias``
   renamed to a ``.bias``, and DeepSeek MLA's ``kv_b_proj`` split into ``k_b`` (transposed per
   head) and ``v_b`` when the base stores them so. The nextn names themselves
   (``blk.N.nextn.eh_proj`` …) come from :data:`NEXTN_NAMES`.

Each result is a :class:`HeadTensor`: a GGUF name, a shape, and the sidecar row ranges to
concatenate, so the writer can stream it without holding a whole tensor in memory.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

import gguf

from app.engine.errors import GraftError
from app.engine.graft.sidecar import Sidecar, SidecarTensor

QWEN_ARCHITECTURES = ("qwen35", "qwen35moe", "qwen3next")
NEXTN_ARCHITECTURES = ("deepseek2", "glm4moe")
SUPPORTED_ARCHITECTURES = QWEN_ARCHITECTURES + NEXTN_ARCHITECTURES
ARCH_BY_NAME = {name: arch for arch, name in gguf.MODEL_ARCH_NAMES.items()}

QWEN_MTP_RENAMES = {
    "fc": "eh_proj",
    "pre_fc_norm_embedding": "enorm",
    "pre_fc_norm_hidden": "hnorm",
    "norm": "shared_head.norm",
}
"""``_QwenMtpMixin.filter_tensors``' remapper: top-level ``mtp.<x>.weight`` → layer name."""

NEXTN_NAMES = {
    "eh_proj": "nextn.eh_proj",
    "enorm": "nextn.enorm",
    "hnorm": "nextn.hnorm",
    "shared_head.norm": "nextn.shared_head_norm",
    "shared_head.head": "nextn.shared_head_head",
    "embed_tokens": "nextn.embed_tokens",
}
"""Layer-relative HF name → GGUF name after ``blk.N.`` (gguf-py's ``MODEL_TENSOR.NEXTN_*``)."""

_LAYER = re.compile(r"^model\.layers\.(\d+)\.(.+)$")
_EXPERT = re.compile(r"^mlp\.experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")
_FUSED_GATE_UP = re.compile(r"^mlp\.experts\.gate_up_proj(\.weight)?$")
_FUSED_DOWN = re.compile(r"^mlp\.experts\.down_proj(\.weight)?$")


@dataclass(frozen=True)
class RowSlice:
    """``count`` rows of a sidecar tensor from row ``first`` (the tensor seen as rows × last
    axis), written transposed when ``transpose`` (a count × L block becomes L rows of count)."""

    source: str
    first: int
    count: int
    transpose: bool = False


@dataclass(frozen=True)
class HeadTensor:
    """One tensor of the grafted MTP block."""

    name: str
    shape: tuple[int, ...]
    """Row-major (numpy/safetensors order); the GGUF dimensions are this reversed."""
    slices: tuple[RowSlice, ...]
    add_one: bool = False
    """Store w + 1 (an offset-style Qwen RMSNorm weight: Qwen computes x · (1 + w))."""

    @property
    def dims(self) -> tuple[int, ...]:
        """GGML order, as a GGUF tensor table lists them."""
        return tuple(reversed(self.shape))

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(piece.source for piece in self.slices))


@dataclass(frozen=True)
class BaseShapes:
    """What the mapping needs from the base: its architecture, trunk size and MLA form."""

    architecture: str
    trunk_blocks: int
    k_b_dims: tuple[int, ...] | None
    """The trunk's ``attn_k_b`` dims {nope, kv_lora, heads} when it splits ``kv_b_proj``."""
    v_b_dims: tuple[int, ...] | None


def layer_indexed_names(sidecar: Sidecar, architecture: str, trunk_blocks: int) -> dict[str, str]:
    """Sidecar name → converter-style ``model.layers.{block}.<rest>`` name (step 1)."""
    if architecture in QWEN_ARCHITECTURES:
        return _qwen_layer_names(sidecar, trunk_blocks)
    return _nextn_layer_names(sidecar, trunk_blocks)


def _qwen_layer_names(sidecar: Sidecar, trunk_blocks: int) -> dict[str, str]:
    names: dict[str, str] = {}
    for name in sidecar.tensors:
        short = name.removeprefix("model.") if name.startswith("model.mtp.") else name
        parts = short.split(".", 3)
        if parts[0] != "mtp":
            raise GraftError(
                f"sidecar {sidecar.path.name}: tensor {name} is not a Qwen MTP tensor (mtp.*); "
                "this sidecar was made from another model family than the base GGUF"
            )
        if len(parts) == 4 and parts[1] == "layers" and parts[2].isdecimal():
            names[name] = f"model.layers.{trunk_blocks + int(parts[2])}.{parts[3]}"
        elif len(parts) == 3 and parts[1] in QWEN_MTP_RENAMES:
            names[name] = f"model.layers.{trunk_blocks}.{QWEN_MTP_RENAMES[parts[1]]}.{parts[2]}"
        else:
            raise GraftError(
                f"sidecar {sidecar.path.name}: tensor {name} has no place in a Qwen MTP block "
                "(llama.cpp's converter knows mtp.fc, mtp.pre_fc_norm_*, mtp.norm and "
                "mtp.layers.N.*)"
            )
    return names


def _nextn_layer_names(sidecar: Sidecar, trunk_blocks: int) -> dict[str, str]:
    layers: dict[str, tuple[int, str]] = {}
    for name in sidecar.tensors:
        match = _LAYER.match(name)
        if not match:
            raise GraftError(
                f"sidecar {sidecar.path.name}: tensor {name} is not a NextN layer tensor "
                "(model.layers.N.*); this sidecar was made from another model family than the "
                "base GGUF"
            )
        layers[name] = (int(match.group(1)), match.group(2))
    sources = sorted({index for index, _ in layers.values()})
    if sources[0] != trunk_blocks:
        raise GraftError(
            f"sidecar {sidecar.path.name}: its NextN layer model.layers.{sources[0]} follows a "
            f"{sources[0]}-layer trunk, but the base GGUF's trunk has {trunk_blocks} blocks; "
            "the sidecar belongs to another model"
        )
    block_of = {source: trunk_blocks + rank for rank, source in enumerate(sources)}
    return {name: f"model.layers.{block_of[i]}.{rest}" for name, (i, rest) in layers.items()}


def map_head_tensors(
    sidecar: Sidecar, base: BaseShapes, offset_norms: bool
) -> tuple[HeadTensor, ...]:
    """Every tensor of the grafted block(s), in the order they will be written (step 2)."""
    layer_names = layer_indexed_names(sidecar, base.architecture, base.trunk_blocks)
    blocks = {_split_layer_name(name)[0] for name in layer_names.values()}
    name_map = gguf.get_tensor_name_map(ARCH_BY_NAME[base.architecture], max(blocks) + 1)
    experts: dict[tuple[int, str], dict[int, SidecarTensor]] = defaultdict(dict)
    mapped: list[HeadTensor] = []
    for source, layer_name in layer_names.items():
        tensor = sidecar.tensors[source]
        block, rest = _split_layer_name(layer_name)
        if expert := _EXPERT.match(rest):
            experts[(block, expert.group(2))][int(expert.group(1))] = tensor
            continue
        if _FUSED_GATE_UP.match(rest):
            mapped.extend(_split_gate_up(tensor, block, name_map))
            continue
        if _FUSED_DOWN.match(rest):
            hf_name = f"model.layers.{block}.mlp.experts.down_proj.weight"
            mapped.append(_whole(tensor, _gguf_name(name_map, hf_name, source), False))
            continue
        if rest.endswith("self_attn.kv_b_proj.weight") and base.k_b_dims and base.v_b_dims:
            mapped.extend(_split_kv_b(tensor, block, base, name_map))
            continue
        rest = rest.replace("e_score_correction_bias", "e_score_correction.bias")
        nextn_key = rest.rsplit(".", 1)[0]
        if nextn_key in NEXTN_NAMES:
            gguf_name = f"blk.{block}.{NEXTN_NAMES[nextn_key]}.{rest.rsplit('.', 1)[1]}"
        else:
            gguf_name = _gguf_name(name_map, f"model.layers.{block}.{rest}", source)
        add_one = offset_norms and is_offset_norm(layer_name)
        mapped.append(_whole(tensor, gguf_name, add_one))
    for (block, projection), by_index in sorted(experts.items()):
        mapped.append(_stacked_experts(sidecar, block, projection, by_index, name_map))
    return tuple(mapped)


def _split_layer_name(layer_name: str) -> tuple[int, str]:
    """``model.layers.{block}.{rest}`` → (block, rest); step 1 only produces such names."""
    match = _LAYER.match(layer_name)
    assert match is not None, layer_name
    return int(match.group(1)), match.group(2)


def is_offset_norm(layer_name: str) -> bool:
    """The tensors the Qwen converter adds 1 to, judged by the layer-indexed name (so
    ``mtp.pre_fc_norm_embedding`` counts, as ``enorm``): RMSNorm weights, except the gated delta
    net's own."""
    return layer_name.endswith("norm.weight") and not layer_name.endswith("linear_attn.norm.weight")


def _gguf_name(name_map: gguf.TensorNameMap, hf_name: str, source: str) -> str:
    gguf_name = name_map.get_name(hf_name, try_suffixes=(".weight", ".bias"))
    if gguf_name is None:
        raise GraftError(
            f"sidecar tensor {source} (as {hf_name}) has no GGUF name in llama.cpp's tensor "
            "table for this architecture; the sidecar does not match the base GGUF's model"
        )
    return gguf_name


def _whole(tensor: SidecarTensor, name: str, add_one: bool) -> HeadTensor:
    return HeadTensor(name, tensor.shape, (RowSlice(tensor.name, 0, tensor.rows),), add_one)


def _stacked_experts(
    sidecar: Sidecar,
    block: int,
    projection: str,
    by_index: dict[int, SidecarTensor],
    name_map: gguf.TensorNameMap,
) -> HeadTensor:
    count = len(by_index)
    if sorted(by_index) != list(range(count)):
        missing = sorted(set(range(max(by_index) + 1)) - set(by_index))
        raise GraftError(
            f"sidecar {sidecar.path.name}: block {block}'s experts are incomplete for "
            f"{projection} (missing expert(s) {missing[:8]}); extract the sidecar again"
        )
    shapes = {tensor.shape for tensor in by_index.values()}
    if len(shapes) != 1:
        raise GraftError(
            f"sidecar {sidecar.path.name}: block {block}'s {projection} experts differ in shape "
            f"({sorted(shapes)}); extract the sidecar again"
        )
    shape = shapes.pop()
    hf_name = f"model.layers.{block}.mlp.experts.{projection}.weight"
    first = by_index[0].name
    slices = tuple(RowSlice(by_index[i].name, 0, by_index[i].rows) for i in range(count))
    return HeadTensor(_gguf_name(name_map, hf_name, first), (count, *shape), slices)


def _split_gate_up(
    tensor: SidecarTensor, block: int, name_map: gguf.TensorNameMap
) -> list[HeadTensor]:
    if len(tensor.shape) != 3 or tensor.shape[1] % 2:
        raise GraftError(
            f"sidecar tensor {tensor.name} has shape {list(tensor.shape)}; a fused gate_up_proj "
            "is [experts, 2 × expert_ff, hidden]"
        )
    experts, double_ff, hidden = tensor.shape
    ff = double_ff // 2
    result = []
    for half, projection in enumerate(("gate_proj", "up_proj")):
        hf_name = f"model.layers.{block}.mlp.experts.{projection}.weight"
        slices = tuple(
            RowSlice(tensor.name, expert * double_ff + half * ff, ff) for expert in range(experts)
        )
        name = _gguf_name(name_map, hf_name, tensor.name)
        result.append(HeadTensor(name, (experts, ff, hidden), slices))
    return result


def _split_kv_b(
    tensor: SidecarTensor, block: int, base: BaseShapes, name_map: gguf.TensorNameMap
) -> list[HeadTensor]:
    """DeepSeek MLA: kv_b_proj [heads·(nope+v), kv_lora] → k_b {nope, kv_lora, heads} (each
    head's nope rows transposed) and v_b {kv_lora, v, heads} (``DeepseekV2Model``)."""
    assert base.k_b_dims is not None and base.v_b_dims is not None
    nope, kv_lora, heads = base.k_b_dims
    value = base.v_b_dims[1]
    expected = (heads * (nope + value), kv_lora)
    if tensor.shape != expected:
        raise GraftError(
            f"sidecar tensor {tensor.name} has shape {list(tensor.shape)} but the base's MLA "
            f"({heads} heads, nope {nope}, value {value}, kv_lora {kv_lora}) needs "
            f"{list(expected)}; the sidecar belongs to another model"
        )
    per_head = nope + value
    k_name = _gguf_name(name_map, f"model.layers.{block}.self_attn.k_b_proj.weight", tensor.name)
    v_name = _gguf_name(name_map, f"model.layers.{block}.self_attn.v_b_proj.weight", tensor.name)
    k_slices = tuple(RowSlice(tensor.name, h * per_head, nope, True) for h in range(heads))
    v_slices = tuple(RowSlice(tensor.name, h * per_head + nope, value) for h in range(heads))
    return [
        HeadTensor(k_name, (heads, kv_lora, nope), k_slices),
        HeadTensor(v_name, (heads, value, kv_lora), v_slices),
    ]
