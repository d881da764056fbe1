"""Finding the MTP head tensors of a checkpoint and everything needed to read them.

Which names are MTP heads, and whether every layer the config declares is there, is decided in
:mod:`app.engine.mtp.layouts`. A checkpoint missing declared layers fails with a message saying
so, unless the caller asks for a partial extraction (then the missing layers are recorded).

Only the index and the headers of the shards that hold MTP tensors are read. Scale companions are
paired with their weights here (they are consumed by dequantisation, not copied), and every
tensor's dtype and block layout are checked, so an unsupported checkpoint fails before any data
is fetched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.engine.errors import ExtractError
from app.engine.mtp.blocks import BlockLayout, FlatBlocks, resolve_blocks
from app.engine.mtp.checkpoint import INDEX_FILE, read_checkpoint_index
from app.engine.mtp.header import ShardHeader, StoredTensor, read_shard_header
from app.engine.mtp.layouts import LayoutMatch, find_layout
from app.engine.mtp.source import CheckpointSource

QUANTISED_DTYPES = ("F8_E4M3", "I8")
SCALE_DTYPES = ("F8_E8M0", "F32", "BF16")
PLAIN_DTYPES = ("BF16", "F16", "F32")


@dataclass(frozen=True)
class MtpTensor:
    """One output tensor of the sidecar, with the scale tensor that dequantises it (if any)."""

    tensor: StoredTensor
    scale: StoredTensor | None = None
    blocks: BlockLayout | None = None
    """Which elements share which scale; set exactly when ``scale`` is."""

    @property
    def name(self) -> str:
        return self.tensor.name

    @property
    def output_nbytes(self) -> int:
        return self.tensor.numel * 2

    @property
    def source_nbytes(self) -> int:
        return self.tensor.nbytes + (self.scale.nbytes if self.scale else 0)


@dataclass(frozen=True)
class MtpDetection:
    """What a checkpoint's MTP heads are and where their bytes lie."""

    source_label: str
    layout: str
    layer_indices: tuple[int, ...]
    tensors: tuple[MtpTensor, ...]
    """Output tensors sorted by name (scale companions are attached, not listed)."""
    family: str = "unknown"
    """The config's ``model_type``, e.g. ``longcat_flash`` (one layout serves many families)."""
    missing_layers: tuple[int, ...] = ()
    """Layers the config declares that the checkpoint lacks (only for a partial extraction)."""

    @property
    def bytes_needed(self) -> int:
        """Source bytes extraction must read: every output tensor and scale, nothing else."""
        return sum(t.source_nbytes for t in self.tensors)

    @property
    def output_data_bytes(self) -> int:
        return sum(t.output_nbytes for t in self.tensors)

    @property
    def shards(self) -> tuple[str, ...]:
        names = {t.tensor.shard for t in self.tensors}
        names.update(t.scale.shard for t in self.tensors if t.scale)
        return tuple(sorted(names))


def detect_mtp(source: CheckpointSource, allow_partial: bool = False) -> MtpDetection:
    """The MTP heads of ``source``; with ``allow_partial`` a checkpoint that lacks some of the
    layers its config declares gives the layers present instead of an error."""
    index = read_checkpoint_index(source)
    match = find_layout(source.label, sorted(index.weight_map), index.config)
    if match.missing and not allow_partial:
        raise ExtractError(_missing_layers_message(source.label, match))
    selected = list(match.names)
    headers = _read_headers(source, index.weight_map, selected, index.headers)
    stored = {name: headers[index.weight_map[name]].tensors[name] for name in selected}
    tensors = pair_scales(source.label, stored)
    refuse_packed_int8(source.label, tensors, index.config)
    return MtpDetection(
        source_label=source.label,
        layout=match.layout,
        layer_indices=match.layer_indices,
        tensors=tensors,
        family=match.family,
        missing_layers=match.missing,
    )


def _missing_layers_message(label: str, match: LayoutMatch) -> str:
    missing = list(match.missing)
    first = match.prefix.format(i=missing[0])
    found = list(match.layer_indices)
    return (
        f"{label}: config.json sets {match.declared}, but the checkpoint has no tensors for MTP "
        f"layer(s) {missing} ({first}*); it has layer(s) {found} only. The index or "
        "shards are incomplete — re-download them, or extract the layers present with "
        "`mtp-studio extract --allow-partial` (the sidecar then records the missing layers)"
    )


def _read_headers(
    source: CheckpointSource,
    weight_map: Mapping[str, str],
    selected: list[str],
    known: Mapping[str, ShardHeader],
) -> dict[str, ShardHeader]:
    files = source.file_sizes()
    headers = dict(known)
    for shard in sorted({weight_map[n] for n in selected}):
        if shard in headers:
            continue
        if shard not in files:
            raise ExtractError(
                f"{source.label}/{INDEX_FILE} names shard {shard} which is not in the checkpoint; "
                "download that shard (or the whole checkpoint) again"
            )
        headers[shard] = read_shard_header(source, shard)
    for name in selected:
        shard = weight_map[name]
        if name not in headers[shard].tensors:
            raise ExtractError(
                f"{source.label}/{INDEX_FILE} places tensor {name} in {shard}, but that shard's "
                "header has no such tensor; the index and shards are from different revisions — "
                "re-download them"
            )
    return headers


def _scale_owner(name: str, stored: Mapping[str, StoredTensor]) -> str | None:
    """The weight a scale companion belongs to, or ``None`` if ``name`` is not a companion."""
    if name.endswith("_scale_inv"):
        owner = name.removesuffix("_scale_inv")
    elif name.endswith("_scale"):
        owner = name.removesuffix("_scale")
    elif name.endswith(".scale"):
        owner = name.removesuffix(".scale") + ".weight"
    else:
        return None
    return owner if owner in stored else None


def pair_scales(label: str, stored: Mapping[str, StoredTensor]) -> tuple[MtpTensor, ...]:
    scales: dict[str, StoredTensor] = {}
    for name, tensor in stored.items():
        owner = _scale_owner(name, stored)
        if owner is None:
            continue
        if owner in scales:
            raise ExtractError(
                f"{label}: {owner} has two scale tensors ({scales[owner].name} and {name}); "
                "the checkpoint's quantisation is ambiguous — report it with the model name"
            )
        scales[owner] = tensor
    consumed = {scale.name for scale in scales.values()}
    return tuple(
        _checked(label, tensor, scales.get(name))
        for name, tensor in sorted(stored.items())
        if name not in consumed
    )


def _config_dims(config: Mapping[str, Any]) -> dict[int, str]:
    """Sizes the config declares (``hidden_size``, ``moe_intermediate_size``, …) → their key."""
    text_config = config.get("text_config")
    scopes = [config] + ([text_config] if isinstance(text_config, dict) else [])
    dims: dict[int, str] = {}
    for scope in scopes:
        for key, value in scope.items():
            if (
                isinstance(value, int)
                and not isinstance(value, bool)
                and value > 1
                and key.endswith(("_size", "_dim", "_rank"))
            ):
                dims.setdefault(value, key)
    return dims


MX_BLOCK = 32
"""Elements per E8M0 scale in the OCP MX formats (MXINT8 and MXFP4 alike)."""


def refuse_packed_int8(
    label: str, tensors: tuple[MtpTensor, ...], config: Mapping[str, Any]
) -> None:
    """Refuse I8 weights that hold two 4-bit codes a byte instead of one INT8 each.

    safetensors has no FP4 dtype, so packed FP4 (e.g. MoE experts) is stored as I8 with a row
    half as wide as the layer's input. Decoded as INT8 it gives plausible but wrong values. Two
    signs give it away: the row is half of a size the config declares (and not itself one), or
    the E8M0 scales cover half an MX block of bytes (an MX scale covers 32 *elements*).
    """
    dims = _config_dims(config)
    for item in tensors:
        if item.scale is None and item.tensor.shape:
            dims.setdefault(item.tensor.shape[-1], item.name)
    for item in tensors:
        shape = item.tensor.shape
        if item.tensor.dtype != "I8" or len(shape) < 2:
            continue
        width = shape[-1]
        where = f"{label}/{item.tensor.shard}: tensor {item.name} is I8 {list(shape)}"
        if width not in dims and 2 * width in dims:
            reason = f"a row of {width} bytes is half of {dims[2 * width]} = {2 * width}"
        elif (
            item.scale is not None
            and item.scale.dtype == "F8_E8M0"
            and isinstance(item.blocks, FlatBlocks)
            and 2 * item.blocks.block == MX_BLOCK
        ):
            reason = (
                f"each E8M0 scale covers {item.blocks.block} bytes, half of an MX block of "
                f"{MX_BLOCK} elements"
            )
        else:
            continue
        raise ExtractError(
            f"{where}, but {reason}: the bytes hold packed 4-bit values (e.g. FP4 experts), "
            "not INT8. This extractor does not decode packed FP4 and refuses rather than write "
            "wrong values — report it with the model name"
        )


def _checked(label: str, tensor: StoredTensor, scale: StoredTensor | None) -> MtpTensor:
    where = f"{label}/{tensor.shard}: tensor {tensor.name}"
    if tensor.dtype in QUANTISED_DTYPES:
        if scale is None:
            raise ExtractError(
                f"{where} is {tensor.dtype} but its scale tensor ({tensor.name}_scale_inv, "
                f"{tensor.name}_scale or <base>.scale) is missing from the checkpoint; the index "
                "or shards are incomplete — re-download them"
            )
        if scale.dtype not in SCALE_DTYPES:
            raise ExtractError(
                f"{label}/{scale.shard}: scale tensor {scale.name} has dtype {scale.dtype}; "
                f"supported scale dtypes are {', '.join(SCALE_DTYPES)}"
            )
        return MtpTensor(tensor, scale, resolve_blocks(tensor, scale, label))
    if tensor.dtype in PLAIN_DTYPES:
        if scale is not None:
            raise ExtractError(
                f"{where} is {tensor.dtype} yet has a scale tensor {scale.name}; only "
                f"{'/'.join(QUANTISED_DTYPES)} weights carry scales — report it with the model name"
            )
        return MtpTensor(tensor)
    raise ExtractError(
        f"{where} has dtype {tensor.dtype}, which cannot be converted to BF16 (supported: "
        f"{', '.join(QUANTISED_DTYPES + PLAIN_DTYPES)})"
    )
