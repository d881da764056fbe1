"""Grafting a separate MTP head GGUF (``mtp-*.gguf``) into the trunk it was converted beside.

Why: llama.cpp's converter can write a model in two files — the trunk with ``--no-mtp`` and the
head alone with ``--mtp`` (named ``mtp-<model>.gguf``). The head file is a GGUF of the same
architecture whose ``block_count`` counts the MTP block(s), whose
``{arch}.nextn_predict_layers`` says how many there are, and whose tensors are the head blocks
``blk.{trunk + i}.*`` (attention, FFN and the ``nextn.*`` tensors: ``eh_proj``, ``enorm``,
``hnorm``, ``shared_head_norm``) plus the shared ``token_embd``/``output_norm``/``output``. Its
tensors are already converted and quantised, so grafting them is a byte copy: the result holds
the trunk's tensors, then the head blocks' tensors exactly as stored in the head file, and the
trunk's metadata with ``block_count`` grown and ``nextn_predict_layers`` set
(:mod:`app.engine.graft.metadata`), which is the file the converter writes without ``--no-mtp``.
Loading the two files side by side needs a llama.cpp whose draft-mtp loader takes a separate
head; one file runs in every MTP-capable build, including the one this app ships.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from app.engine.errors import GraftError
from app.engine.graft.gguf_layout import GgufLayout, TensorInfo, read_gguf_layout
from app.engine.graft.graft import FreeBytes, GraftResult, disk_free_bytes
from app.engine.graft.metadata import MetadataPlan, plan_metadata
from app.engine.graft.writer import Placement, copy_runs, place_tensors, write_gguf
from app.engine.jobs import JobContext, ProgressReporter, ResultEvent
from app.engine.units import format_bytes

HEAD_FILE_TYPE = "as stored in the head file"
SHARED_TENSORS = ("token_embd.weight", "output_norm.weight", "output.weight")
"""Tensors a head file carries for the draft to run alone; the trunk has its own."""
_Q = GGMLQuantizationType
WEIGHT_TYPES = frozenset(
    {_Q.F32, _Q.F16, _Q.BF16, _Q.Q8_0, _Q.Q4_0, _Q.Q4_1, _Q.Q5_0, _Q.Q5_1}
    | {_Q.Q2_K, _Q.Q3_K, _Q.Q4_K, _Q.Q5_K, _Q.Q6_K}
)
"""Types a head's matrices may have in any trunk: what llama.cpp's converter writes (F32, F16,
BF16, Q8_0) and what its quantiser makes of them. Any other type (an IQ or MXFP4 quantisation)
only where the trunk's own matrices use it; integer types (I8…I64) never — llama.cpp crashed
(SIGSEGV) on a head matrix retyped to I64, and a chat died on one retyped to IQ2_XXS or MXFP4."""


@dataclass(frozen=True)
class HeadFilePlan:
    """What grafting ``head_file`` into ``trunk`` writes."""

    trunk: GgufLayout
    head_file: GgufLayout
    trunk_blocks: int
    head_blocks: int
    head: tuple[TensorInfo, ...]
    """The head file's ``blk.{trunk..}`` tensors, copied as stored."""
    metadata: MetadataPlan

    @property
    def head_bytes(self) -> int:
        return sum(tensor.nbytes for tensor in self.head)

    @property
    def estimated_bytes(self) -> int:
        """An upper bound of the output size (header growth and alignment padding included)."""
        body = sum(tensor.nbytes for tensor in self.trunk.tensors) + self.head_bytes
        padding = self.trunk.alignment * (len(self.trunk.tensors) + len(self.head) + 2)
        return self.trunk.data_start + body + padding + 64 * 1024


def is_head_gguf(path: Path) -> bool:
    """Whether ``path`` is named as a converter's separate head file (``mtp-*.gguf``)."""
    name = Path(path).name.lower()
    return name.startswith("mtp-") and name.endswith(".gguf")


def plan_head_file_graft(trunk_path: Path, head_path: Path) -> HeadFilePlan:
    """Every check, nothing written; a :class:`GraftError` naming the problem if there is one."""
    trunk = read_gguf_layout(Path(trunk_path))
    head_file = read_gguf_layout(Path(head_path))
    arch = trunk.architecture
    if head_file.architecture != arch:
        raise GraftError(
            f"{head_file.path.name} is a '{head_file.architecture or 'unknown'}' model but "
            f"{trunk.path.name} is '{arch or 'unknown'}'; the head file belongs to another model"
        )
    trunk_blocks = _positive(trunk, f"{arch}.block_count")
    if trunk.value(f"{arch}.nextn_predict_layers", 0) or _nextn_tensors(trunk):
        raise GraftError(
            f"{trunk.path.name} already has an MTP head ({arch}.nextn_predict_layers is set); "
            "it needs no head file"
        )
    head_blocks = head_file.value(f"{arch}.nextn_predict_layers", 0)
    if not isinstance(head_blocks, int) or head_blocks <= 0:
        raise GraftError(
            f"{head_file.path.name} declares no {arch}.nextn_predict_layers; it is not an MTP "
            "head file (llama.cpp's convert_hf_to_gguf.py --mtp writes one)"
        )
    declared = _positive(head_file, f"{arch}.block_count")
    if declared - head_blocks != trunk_blocks:
        raise GraftError(
            f"{head_file.path.name} was converted from a model of {declared - head_blocks} trunk "
            f"blocks but {trunk.path.name} has {trunk_blocks}; the head file belongs to another "
            "model"
        )
    head = tuple(t for t in head_file.tensors if _block_of(t.name) >= trunk_blocks)
    found = {_block_of(t.name) for t in head}
    missing = sorted(set(range(trunk_blocks, declared)) - found)
    if missing:
        raise GraftError(
            f"{head_file.path.name} has no tensors for MTP block(s) "
            f"{', '.join(map(str, missing))}; download it again"
        )
    _check_same_model(trunk, head_file, head, trunk_blocks)
    _check_types(trunk, head_file, head)
    return HeadFilePlan(
        trunk=trunk,
        head_file=head_file,
        trunk_blocks=trunk_blocks,
        head_blocks=head_blocks,
        head=head,
        metadata=plan_metadata(trunk, trunk_blocks, trunk_blocks, head_blocks),
    )


def graft_head_file(
    trunk_path: Path,
    head_path: Path,
    out: Path,
    ctx: JobContext | None = None,
    free_bytes: FreeBytes = disk_free_bytes,
) -> GraftResult:
    """Write ``trunk_path`` with the MTP block(s) of the head file ``head_path`` to ``out``."""
    ctx = ctx or JobContext()
    started = time.monotonic()
    out = Path(out)
    ctx.stage("check", f"{Path(trunk_path).name} + {Path(head_path).name}")
    plan = plan_head_file_graft(trunk_path, head_path)
    _check_output(plan, out, free_bytes)
    ctx.log(
        f"{plan.trunk.architecture}: {plan.trunk_blocks} trunk blocks + {plan.head_blocks} MTP "
        f"block(s) from {plan.head_file.path.name}, {len(plan.head)} tensors "
        f"({format_bytes(plan.head_bytes)}) copied as stored"
    )
    ctx.stage("write", str(out))
    written = _write(plan, out, ctx)
    result = GraftResult(
        out_path=out,
        architecture=plan.trunk.architecture,
        trunk_blocks=plan.trunk_blocks,
        head_blocks=plan.head_blocks,
        replaced_blocks=0,
        head_tensors=len(plan.head),
        head_type=HEAD_FILE_TYPE,
        norm_style="as converted",
        head_bytes=plan.head_bytes,
        bytes_written=written,
        seconds=time.monotonic() - started,
    )
    ctx.emit(ResultEvent(result.to_json()))
    return result


def _write(plan: HeadFilePlan, out: Path, ctx: JobContext) -> int:
    alignment = plan.trunk.alignment
    trunk_places, trunk_runs, trunk_end = place_tensors(plan.trunk.tensors, alignment)
    head_places, head_runs, end = place_tensors(plan.head, alignment, start=trunk_end)

    def body(fd: int, data_start: int, progress: ProgressReporter) -> None:
        copy_runs(plan.trunk, fd, data_start, trunk_runs, progress)
        copy_runs(plan.head_file, fd, data_start, head_runs, progress)

    places: list[Placement] = trunk_places + head_places
    return write_gguf(plan.trunk, plan.metadata, places, end, out, ctx, body)


def _check_output(plan: HeadFilePlan, out: Path, free_bytes: FreeBytes) -> None:
    for name, layout in (("trunk GGUF", plan.trunk), ("head file", plan.head_file)):
        if out.exists() and out.resolve() == layout.path.resolve():
            raise GraftError(f"the output {out} is the {name} itself; choose another file")
    if not out.parent.is_dir():
        raise GraftError(f"the output folder {out.parent} does not exist; create it first")
    needed, free = plan.estimated_bytes, free_bytes(out.parent)
    if free < needed:
        raise GraftError(
            f"not enough free space in {out.parent}: the grafted file needs about "
            f"{format_bytes(needed)} and {format_bytes(free)} are free; free some space"
        )


def _check_same_model(
    trunk: GgufLayout, head_file: GgufLayout, head: tuple[TensorInfo, ...], trunk_blocks: int
) -> None:
    arch = trunk.architecture
    for key in (f"{arch}.embedding_length", f"{arch}.attention.head_count"):
        if trunk.value(key) != head_file.value(key):
            raise GraftError(
                f"{key} differs: {trunk.value(key)} in {trunk.path.name}, "
                f"{head_file.value(key)} in {head_file.path.name}; the head file belongs to "
                "another model"
            )
    for name in SHARED_TENSORS:
        ours, theirs = trunk.tensor(name), head_file.tensor(name)
        if ours and theirs and ours.dims != theirs.dims:
            raise GraftError(
                f"{name} is {list(ours.dims)} in {trunk.path.name} but {list(theirs.dims)} in "
                f"{head_file.path.name} (another vocabulary); the head file belongs to another "
                "model"
            )
    for tensor in head:
        suffix = tensor.name.split(".", 2)[2]
        reference = _last_with(trunk, trunk_blocks, suffix)
        if reference is not None and reference.dims != tensor.dims:
            raise GraftError(
                f"{tensor.name} of {head_file.path.name} is {list(tensor.dims)} but "
                f"{reference.name} of {trunk.path.name} is {list(reference.dims)}; the head file "
                "belongs to another model"
            )


def _check_types(trunk: GgufLayout, head_file: GgufLayout, head: tuple[TensorInfo, ...]) -> None:
    """Each head tensor's type is one llama.cpp can run for it (see :data:`WEIGHT_TYPES`); a
    norm is a vector in F32, as the converter always writes it (one stored as a 256×1 matrix
    stopped llama.cpp with SIGABRT)."""
    trunk_types = {tensor.ggml_type for tensor in trunk.tensors if len(tensor.dims) > 1}
    for tensor in head:
        kind = _type_name(tensor.ggml_type)
        if len(tensor.dims) == 1 or tensor.name.endswith("norm.weight"):
            usable = len(tensor.dims) == 1 and tensor.ggml_type == _Q.F32
            expected = "a vector in F32, as llama.cpp's converter writes every norm"
            kind = f"{kind} {list(tensor.dims)}"
        else:
            usable = tensor.ggml_type in WEIGHT_TYPES | trunk_types
            block = GGML_QUANT_SIZES.get(_Q(tensor.ggml_type), (1, 0))[0] if usable else 1
            usable = usable and tensor.dims[0] % block == 0
            expected = (
                "F32, F16, BF16, Q8_0, a legacy or K quantisation, or a type the trunk's own "
                "matrices use, with rows of whole quantisation blocks"
            )
        if not usable:
            raise GraftError(
                f"{tensor.name} of {head_file.path.name} is stored as {kind}, which the MTP head "
                f"cannot use (expected {expected}); the head file is damaged or was not made by "
                "llama.cpp's tools — download it again"
            )


def _type_name(ggml_type: int) -> str:
    try:
        return _Q(ggml_type).name
    except ValueError:
        return f"type {ggml_type}"


def _last_with(layout: GgufLayout, trunk_blocks: int, suffix: str) -> TensorInfo | None:
    for block in range(trunk_blocks - 1, -1, -1):
        if tensor := layout.tensor(f"blk.{block}.{suffix}"):
            return tensor
    return None


def _positive(layout: GgufLayout, key: str) -> int:
    value = layout.value(key)
    if not isinstance(value, int) or value <= 0:
        raise GraftError(
            f"{layout.path.name} has no usable {key} ({value!r}); it is not a complete "
            "llama.cpp model file"
        )
    return value


def _nextn_tensors(layout: GgufLayout) -> bool:
    return any(".nextn." in tensor.name for tensor in layout.tensors)


def _block_of(name: str) -> int:
    """The block number of a ``blk.N.*`` tensor; -1 for the others (embeddings, output)."""
    return int(name.split(".", 2)[1]) if name.startswith("blk.") else -1
