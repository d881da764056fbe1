"""Decides whether a base GGUF and a sidecar can be grafted, and exactly what the result holds.

Everything is checked here, before a byte is written: the architecture has an MTP graph in
llama.cpp and a known mapping, the base is complete, the base has no head (or ``replace`` drops
it), and every head tensor's shape equals the base's — hidden size, vocabulary, head counts and
all the rest — so a sidecar of another model is refused with the tensor and both shapes named.
It reads only headers and the sidecar's small norm tensors, so the GUI can call
:func:`check_graft` to decide whether to offer "Add the MTP head" at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gguf import GGMLQuantizationType

from app.engine.errors import GraftError
from app.engine.graft.gguf_layout import GgufLayout, TensorInfo, read_gguf_layout
from app.engine.graft.metadata import MetadataPlan, plan_metadata
from app.engine.graft.naming import (
    QWEN_ARCHITECTURES,
    SUPPORTED_ARCHITECTURES,
    BaseShapes,
    HeadTensor,
    map_head_tensors,
)
from app.engine.graft.norms import ABSOLUTE, OFFSET, detect_norm_style
from app.engine.graft.quantise import HEAD_TYPES, storage_type, stored_nbytes
from app.engine.graft.sidecar import Sidecar, read_sidecar


@dataclass(frozen=True)
class PlannedTensor:
    head: HeadTensor
    ggml_type: GGMLQuantizationType
    nbytes: int


@dataclass(frozen=True)
class GraftPlan:
    """What a graft of ``sidecar`` into ``base`` will write."""

    base: Path
    sidecar: Path
    architecture: str
    trunk_blocks: int
    head_blocks: int
    replaced_blocks: int
    """MTP blocks of the base that are dropped (``replace``); 0 for a trunk-only base."""
    head_type: str
    norm_style: str
    """``offset`` (1 added, as the Qwen converter does) or ``absolute`` (stored as is)."""
    kept: tuple[TensorInfo, ...]
    """Base tensors copied as bytes, in the base's order."""
    head: tuple[PlannedTensor, ...]
    metadata: MetadataPlan
    layout: GgufLayout

    @property
    def head_bytes(self) -> int:
        return sum(tensor.nbytes for tensor in self.head)

    @property
    def estimated_bytes(self) -> int:
        """An upper bound of the output size (header growth and alignment padding included)."""
        base = sum(tensor.nbytes for tensor in self.kept)
        padding = self.layout.alignment * (len(self.kept) + len(self.head) + 2)
        return self.layout.data_start + base + self.head_bytes + padding + 64 * 1024


@dataclass(frozen=True)
class GraftCheck:
    """The GUI's question "can this GGUF take this sidecar's head?" answered without writing."""

    plan: GraftPlan | None
    problem: str | None
    """Why not (the :class:`GraftError` message), or None when the graft can run."""

    @property
    def ok(self) -> bool:
        return self.problem is None


def check_graft(base: Path, sidecar: Path, replace: bool = False) -> GraftCheck:
    """Whether ``sidecar`` can be grafted into ``base``, and why not; writes nothing."""
    try:
        return GraftCheck(plan_graft(base, sidecar, "q8_0", replace), None)
    except GraftError as exc:
        return GraftCheck(None, str(exc))


def plan_graft(
    base: Path, sidecar: Path, head_type: str = "q8_0", replace: bool = False
) -> GraftPlan:
    """The complete plan of a graft; a :class:`GraftError` naming the problem if there is one."""
    if head_type not in HEAD_TYPES:
        raise GraftError(f"head type {head_type!r} is not one of {', '.join(HEAD_TYPES)}")
    layout = read_gguf_layout(Path(base))
    arch = layout.architecture
    if arch not in SUPPORTED_ARCHITECTURES:
        raise GraftError(
            f"{layout.path.name} is a '{arch or 'unknown'}' model; grafting supports "
            f"{', '.join(SUPPORTED_ARCHITECTURES)} (the architectures whose MTP block llama.cpp "
            "runs and whose converter mapping is known here)"
        )
    old_blocks = _required_int(layout, f"{arch}.block_count")
    existing = _existing_head_blocks(layout, old_blocks)
    if existing and not replace:
        raise GraftError(
            f"{layout.path.name} already has {existing} MTP block(s) ({arch}.nextn_predict_layers"
            f" = {existing}); pass --replace (replace=True) to swap in the sidecar's head"
        )
    trunk = old_blocks - existing
    side = read_sidecar(Path(sidecar))
    style = detect_norm_style(side).style if arch in QWEN_ARCHITECTURES else ABSOLUTE
    shapes = BaseShapes(
        arch,
        trunk,
        _trunk_dims(layout, trunk, "attn_k_b.weight"),
        _trunk_dims(layout, trunk, "attn_v_b.weight"),
    )
    heads = map_head_tensors(side, shapes, offset_norms=style == OFFSET)
    head_blocks = len({_block_of(head.name) for head in heads})
    _check_shapes(layout, side, heads, trunk)
    kept = tuple(tensor for tensor in layout.tensors if _block_of(tensor.name) < trunk)
    planned = []
    for head in heads:
        ggml_type = storage_type(head.name, head.shape, head_type)
        planned.append(PlannedTensor(head, ggml_type, stored_nbytes(head.shape, ggml_type)))
    return GraftPlan(
        base=layout.path,
        sidecar=side.path,
        architecture=arch,
        trunk_blocks=trunk,
        head_blocks=head_blocks,
        replaced_blocks=existing,
        head_type=head_type,
        norm_style=style,
        kept=kept,
        head=tuple(planned),
        metadata=plan_metadata(layout, old_blocks, trunk, head_blocks),
        layout=layout,
    )


def _required_int(layout: GgufLayout, key: str) -> int:
    value = layout.value(key)
    if not isinstance(value, int) or value <= 0:
        raise GraftError(
            f"{layout.path.name} has no usable {key} ({value!r}); it is not a complete "
            "llama.cpp model file"
        )
    return value


def _existing_head_blocks(layout: GgufLayout, blocks: int) -> int:
    declared = layout.value(f"{layout.architecture}.nextn_predict_layers", 0)
    declared = declared if isinstance(declared, int) else 0
    nextn_blocks = {_block_of(t.name) for t in layout.tensors if ".nextn." in t.name}
    from_tensors = blocks - min(nextn_blocks) if nextn_blocks else 0
    return max(declared, from_tensors)


def _block_of(name: str) -> int:
    """The block number of a ``blk.N.*`` tensor; -1 for the others (embeddings, output)."""
    if not name.startswith("blk."):
        return -1
    return int(name.split(".", 2)[1])


def _suffix(name: str) -> str:
    return name.split(".", 2)[2]


def _trunk_dims(layout: GgufLayout, trunk: int, suffix: str) -> tuple[int, ...] | None:
    reference = _reference(layout, trunk, suffix)
    return reference.dims if reference else None


def _reference(layout: GgufLayout, trunk: int, suffix: str) -> TensorInfo | None:
    """The tensor with this suffix in the last trunk block that has one."""
    for block in range(trunk - 1, -1, -1):
        if tensor := layout.tensor(f"blk.{block}.{suffix}"):
            return tensor
    return None


def _check_shapes(
    layout: GgufLayout, side: Sidecar, heads: tuple[HeadTensor, ...], trunk: int
) -> None:
    arch = layout.architecture
    embd = _required_int(layout, f"{arch}.embedding_length")
    token_embd = layout.tensor("token_embd.weight")
    vocab = token_embd.dims[1] if token_embd and len(token_embd.dims) == 2 else None
    for head in heads:
        source = ", ".join(head.sources)
        suffix = _suffix(head.name)
        if suffix.startswith("nextn."):
            kind = suffix.split(".")[1]
            if kind == "eh_proj" and head.dims != (2 * embd, embd):
                raise GraftError(
                    f"hidden size differs: the sidecar's {source} is {list(head.shape)}, i.e. "
                    f"hidden size {head.shape[0]}, but the base's {arch}.embedding_length is "
                    f"{embd} (eh_proj must be {[embd, 2 * embd]}); the sidecar belongs to "
                    "another model"
                )
            if kind in ("enorm", "hnorm", "shared_head_norm") and head.dims != (embd,):
                raise GraftError(
                    f"hidden size differs: the sidecar's {source} has {list(head.shape)} items "
                    f"but the base's {arch}.embedding_length is {embd}; the sidecar belongs to "
                    "another model"
                )
            if kind in ("embed_tokens", "shared_head_head") and head.dims != (embd, vocab):
                raise GraftError(
                    f"vocabulary differs: the sidecar's {source} is {list(head.shape)} but the "
                    f"base's token_embd.weight is [{vocab}, {embd}] (vocabulary {vocab}); the "
                    "sidecar belongs to another model"
                )
            continue
        reference = _reference(layout, trunk, suffix)
        if reference is None:
            raise GraftError(
                f"the sidecar's {source} becomes {head.name}, but no trunk block of "
                f"{layout.path.name} has a {suffix} to match it; the sidecar belongs to another "
                "model"
            )
        if reference.dims != head.dims:
            raise GraftError(
                f"shape differs: the sidecar's {source} becomes {head.name} with GGUF dims "
                f"{list(head.dims)}, but the base's {reference.name} has {list(reference.dims)}"
                f"{_head_count_hint(layout, suffix)}; the sidecar belongs to another model"
            )
    _check_complete(layout, side, heads, trunk)


def _head_count_hint(layout: GgufLayout, suffix: str) -> str:
    if not suffix.startswith(("attn_q", "attn_k", "attn_v", "attn_output")):
        return ""
    arch = layout.architecture
    fields = ("attention.head_count", "attention.head_count_kv", "attention.key_length")
    values = ", ".join(f"{arch}.{key} = {layout.value(f'{arch}.{key}')}" for key in fields)
    return f" (head count × head size; the base has {values})"


def _check_complete(
    layout: GgufLayout, side: Sidecar, heads: tuple[HeadTensor, ...], trunk: int
) -> None:
    """The head block must carry every tensor of the trunk's last attention block."""
    recurrent = layout.value(f"{layout.architecture}.attention.recurrent_layers")
    block = trunk - 1
    if isinstance(recurrent, list):
        block = max(
            (i for i in range(trunk) if i < len(recurrent) and not recurrent[i]), default=block
        )
    wanted = {_suffix(t.name) for t in layout.tensors if _block_of(t.name) == block}
    for head_block in sorted({_block_of(head.name) for head in heads}):
        have = {_suffix(h.name) for h in heads if _block_of(h.name) == head_block}
        missing = sorted(wanted - have)
        if missing:
            raise GraftError(
                f"sidecar {side.path.name} lacks tensors for block {head_block}: the base's "
                f"attention block blk.{block} has {', '.join(missing)} but the sidecar has "
                "nothing that becomes them; extract the sidecar again from the original release"
            )
