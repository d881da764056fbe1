"""A BF16 checkpoint → an MLX quantised folder with ``mlx_lm.convert``, MTP head kept beside it.

``mlx_lm.convert`` quantises the trunk (``q_bits`` 4 or 8, groups of ``q_group_size``) but its
models' ``sanitize`` drops MTP tensors, so the head is extracted from the BF16 copy into
``mtp.safetensors`` beside the quantised weights, where the MLX backend pairs it. mlx-lm's own
progress lines go to the job log.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path

from app.engine.errors import ConvertError, ExtractError
from app.engine.jobs import JobContext
from app.engine.mtp.extract import extract_mtp
from app.engine.mtp.source import LocalFolderSource

Q_BITS = (4, 8)
SIDECAR_NAME = "mtp.safetensors"


@dataclass(frozen=True)
class MlxFolder:
    """What :func:`quantise_for_mlx` wrote."""

    folder: Path
    q_bits: int
    sidecar: Path | None
    """The MTP head beside the weights (None: the BF16 checkpoint had none)."""


def quantise_for_mlx(
    bf16_dir: Path, out_dir: Path, q_bits: int, q_group_size: int, ctx: JobContext
) -> MlxFolder:
    """Quantise ``bf16_dir`` into ``out_dir`` (which must not exist) and pair its MTP head."""
    if q_bits not in Q_BITS:
        raise ConvertError(f"--q-bits {q_bits} is not supported; choose one of {Q_BITS}")
    from mlx_lm import convert

    ctx.stage("quantise", f"{q_bits}-bit, groups of {q_group_size}")
    log = io.StringIO()
    try:
        with contextlib.redirect_stdout(log):
            convert(
                str(bf16_dir),
                mlx_path=str(out_dir),
                quantize=True,
                q_bits=q_bits,
                q_group_size=q_group_size,
            )
    except (ValueError, KeyError, OSError) as exc:
        raise ConvertError(
            f"mlx_lm.convert could not quantise {bf16_dir} ({exc}); the BF16 copy is kept — "
            "load it as it is, or report the model name"
        ) from None
    finally:
        for line in log.getvalue().splitlines():
            if line.strip():
                ctx.log(f"mlx-lm: {line.strip()}")
    ctx.stage("sidecar", "keeping the MTP head beside the quantised weights")
    sidecar = Path(out_dir) / SIDECAR_NAME
    try:
        extract_mtp(LocalFolderSource(bf16_dir), sidecar)
    except ExtractError as exc:
        ctx.log(f"no MTP head kept: {exc}", "warning")
        return MlxFolder(Path(out_dir), q_bits, None)
    return MlxFolder(Path(out_dir), q_bits, sidecar)
