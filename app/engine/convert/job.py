"""A conversion as a stored job: FP8 → BF16, then optionally quantised for MLX.

The CLI (``mtp-studio convert``) and the chat's "Convert for MLX…" record the same job kind
``convert`` with the same parameters (:meth:`ConvertRequest.spec`), so the job monitor shows it
with progress and can retry it (:func:`convert_job_from_params`, registered in the job store's
kinds). With ``q_bits`` the BF16 copy is an intermediate in a hidden folder beside the output,
removed once the quantised folder is in place.

:func:`default_output_folder` names the copy after the model (``…-bf16`` or ``…-mlx-4bit``,
an ``-fp8`` suffix dropped) beside the source, or in the app's ``converted`` folder when the
source lives in a Hugging Face cache (where a folder is a commit hash other tools manage).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.engine.convert.fp8_check import model_name
from app.engine.convert.fp8_to_bf16 import Bf16Checkpoint, fp8_to_bf16
from app.engine.convert.mlx_quantise import Q_BITS, quantise_for_mlx
from app.engine.errors import ConvertError
from app.engine.graft.job import in_hugging_face_cache
from app.engine.jobs import JobContext, ResultEvent
from app.engine.store.records import JobSpec

CONVERT_KIND = "convert"
DEFAULT_GROUP_SIZE = 64
_FP8_SUFFIX = re.compile(r"[-_.]?fp8$", re.IGNORECASE)


@dataclass(frozen=True)
class ConvertResult:
    """Where the loadable copy is, and what was done to get it."""

    location: Path
    q_bits: int | None
    tensors: int
    dequantised: int
    sidecar: Path | None

    def to_json(self) -> dict[str, Any]:
        return {
            "location": str(self.location),
            "q_bits": self.q_bits,
            "tensors": self.tensors,
            "dequantised": self.dequantised,
            "sidecar": str(self.sidecar) if self.sidecar else None,
        }


@dataclass(frozen=True)
class ConvertRequest:
    source: Path
    out: Path
    q_bits: int | None = None
    """None: stop at BF16; 4 or 8: quantise for MLX with mlx_lm.convert."""
    q_group_size: int = DEFAULT_GROUP_SIZE

    @property
    def title(self) -> str:
        target = f"MLX {self.q_bits}-bit" if self.q_bits else "BF16"
        return f"Convert {model_name(self.source)} to {target}"

    def to_params(self) -> dict[str, Any]:
        return {
            "source": str(self.source),
            "out": str(self.out),
            "q_bits": self.q_bits,
            "q_group_size": self.q_group_size,
        }

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> ConvertRequest:
        try:
            bits = params.get("q_bits")
            return cls(
                source=Path(params["source"]),
                out=Path(params["out"]),
                q_bits=int(bits) if bits is not None else None,
                q_group_size=int(params.get("q_group_size", DEFAULT_GROUP_SIZE)),
            )
        except KeyError as exc:
            raise ConvertError(
                f"the stored convert job lacks its {exc.args[0]!r} parameter"
            ) from None

    def spec(self) -> JobSpec:
        """The job-history record (paths as given, so a retry writes the same folder)."""
        return JobSpec(CONVERT_KIND, self.title, self.to_params())

    def run(self, ctx: JobContext) -> ConvertResult:
        return convert_checkpoint(self, ctx)


def convert_checkpoint(request: ConvertRequest, ctx: JobContext | None = None) -> ConvertResult:
    """Run ``request``: the output folder appears only when complete; its summary is the job's
    result event (``location`` is what the monitor's "Show files" opens)."""
    ctx = ctx or JobContext()
    result = _convert(request, ctx)
    ctx.emit(ResultEvent(result.to_json()))
    return result


def _convert(request: ConvertRequest, ctx: JobContext) -> ConvertResult:
    if request.q_bits is not None and request.q_bits not in Q_BITS:
        raise ConvertError(f"q_bits {request.q_bits} is not supported; choose one of {Q_BITS}")
    if request.q_bits is None:
        done = fp8_to_bf16(request.source, request.out, ctx)
        return ConvertResult(done.folder, None, done.tensors, done.dequantised, None)
    out = Path(request.out).expanduser().absolute()
    if out.exists():
        raise ConvertError(
            f"{out} already exists; choose another output folder or remove it first (nothing "
            "was written)"
        )
    bf16_dir = out.with_name(f".{out.name}.bf16-{secrets.token_hex(4)}")
    try:
        done: Bf16Checkpoint = fp8_to_bf16(request.source, bf16_dir, ctx)
        mlx = quantise_for_mlx(bf16_dir, out, request.q_bits, request.q_group_size, ctx)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(bf16_dir, ignore_errors=True)
    return ConvertResult(mlx.folder, request.q_bits, done.tensors, done.dequantised, mlx.sidecar)


def convert_job_from_params(params: dict[str, Any]) -> Callable[[JobContext], ConvertResult]:
    """The factory the job store uses to run (or retry) a conversion from its parameters."""
    return ConvertRequest.from_params(params).run


def default_output_folder(source: Path, q_bits: int | None, converted_dir: Path) -> Path:
    """``<name>-bf16`` or ``<name>-mlx-<bits>bit`` beside ``source``, or in ``converted_dir``
    when ``source`` is in a Hugging Face cache or its parent cannot be written."""
    stem = _FP8_SUFFIX.sub("", model_name(source)) or model_name(source)
    name = f"{stem}-mlx-{q_bits}bit" if q_bits else f"{stem}-bf16"
    parent = Path(source).parent
    if in_hugging_face_cache(Path(source) / "config.json") or not os.access(parent, os.W_OK):
        return Path(converted_dir) / name
    return parent / name
