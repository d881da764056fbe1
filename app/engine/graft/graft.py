"""``BASE.gguf + mtp.safetensors → OUT.gguf``: the graft as one job.

llama.cpp reads MTP heads only from inside the GGUF and most GGUFs are converted without them, so
one BF16 sidecar per base model is grafted into whichever quantisation a user has. The job plans
(every check, nothing written), checks free space in the output folder, then writes under a
temporary name and renames (:mod:`app.engine.graft.writer`), reporting stages and progress and
honouring cancel through its :class:`JobContext`.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.engine.errors import GraftError
from app.engine.graft.plan import GraftPlan, plan_graft
from app.engine.graft.writer import write_graft
from app.engine.jobs import JobContext, ResultEvent
from app.engine.units import format_bytes

FreeBytes = Callable[[Path], int]


def disk_free_bytes(folder: Path) -> int:
    """Bytes free for this user in ``folder``'s file system."""
    return shutil.disk_usage(folder).free


@dataclass(frozen=True)
class GraftResult:
    out_path: Path
    architecture: str
    trunk_blocks: int
    head_blocks: int
    replaced_blocks: int
    head_tensors: int
    head_type: str
    norm_style: str
    head_bytes: int
    bytes_written: int
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "output": str(self.out_path),
            "architecture": self.architecture,
            "trunk_blocks": self.trunk_blocks,
            "head_blocks": self.head_blocks,
            "replaced_blocks": self.replaced_blocks,
            "head_tensors": self.head_tensors,
            "head_type": self.head_type,
            "norm_style": self.norm_style,
            "head_bytes": self.head_bytes,
            "bytes_written": self.bytes_written,
            "seconds": round(self.seconds, 3),
        }


def graft_mtp(
    base: Path,
    sidecar: Path,
    out: Path,
    head_type: str = "q8_0",
    replace: bool = False,
    ctx: JobContext | None = None,
    free_bytes: FreeBytes = disk_free_bytes,
) -> GraftResult:
    """Write ``base`` with ``sidecar``'s MTP head grafted in to ``out``.

    ``head_type`` is ``q8_0`` (default), ``f16`` or ``bf16``; ``replace`` swaps out a head the
    base already has (refused otherwise). ``free_bytes`` tells the free space of a folder.
    """
    ctx = ctx or JobContext()
    started = time.monotonic()
    base, sidecar, out = Path(base), Path(sidecar), Path(out)
    ctx.stage("check", f"{base.name} + {sidecar.name}")
    plan = plan_graft(base, sidecar, head_type, replace)
    _check_output(plan, out, free_bytes)
    ctx.log(_plan_line(plan))
    ctx.stage("write", str(out))
    written = write_graft(plan, out, ctx)
    result = GraftResult(
        out_path=out,
        architecture=plan.architecture,
        trunk_blocks=plan.trunk_blocks,
        head_blocks=plan.head_blocks,
        replaced_blocks=plan.replaced_blocks,
        head_tensors=len(plan.head),
        head_type=head_type,
        norm_style=plan.norm_style,
        head_bytes=plan.head_bytes,
        bytes_written=written,
        seconds=time.monotonic() - started,
    )
    ctx.emit(ResultEvent(result.to_json()))
    return result


def _check_output(plan: GraftPlan, out: Path, free_bytes: FreeBytes) -> None:
    for name, path in (("base GGUF", plan.base), ("sidecar", plan.sidecar)):
        if out.exists() and out.resolve() == path.resolve():
            raise GraftError(f"--out {out} is the {name} itself; choose another output file")
    if out.is_dir():
        raise GraftError(f"--out {out} is a folder; give the file name to write (…/model.gguf)")
    folder = out.parent
    if not folder.is_dir():
        raise GraftError(f"the output folder {folder} does not exist; create it first")
    needed, free = plan.estimated_bytes, free_bytes(folder)
    if free < needed:
        raise GraftError(
            f"not enough free space in {folder}: the grafted file needs about "
            f"{format_bytes(needed)} ({needed} B) and {format_bytes(free)} ({free} B) are free; "
            "free some space or write to another folder"
        )


def _plan_line(plan: GraftPlan) -> str:
    replaced = f", replacing {plan.replaced_blocks} old block(s)" if plan.replaced_blocks else ""
    norms = "norms +1 (offset-style)" if plan.norm_style == "offset" else "norms as stored"
    return (
        f"{plan.architecture}: {plan.trunk_blocks} trunk blocks + {plan.head_blocks} MTP "
        f"block(s), {len(plan.head)} head tensors ({format_bytes(plan.head_bytes)} as "
        f"{plan.head_type}), {norms}{replaced}"
    )
