"""A note next to an extracted sidecar in scratch, so a failed upload retries without extracting.

Why: extraction is the long part of a publish (it fetches and converts hundreds of MB to GB);
an upload that fails afterwards keeps the sidecar in scratch. The receipt records which source
commit it came from and its SHA-256 (computed while it was written), so the next run of the
same publish reuses the file when the source has not moved — and re-extracts when it has, or
when ``--force`` asks for it. It is written only once the sidecar is complete.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class ExtractionReceipt:
    source_repo: str
    source_sha: str
    layout: str
    layer_indices: tuple[int, ...]
    tensor_count: int
    bytes_needed: int
    size: int
    sha256: str
    tool_version: str


def receipt_path(sidecar: Path) -> Path:
    return sidecar.with_name(sidecar.name + ".receipt.json")


def save_receipt(sidecar: Path, receipt: ExtractionReceipt) -> None:
    target = receipt_path(sidecar)
    temporary = target.with_name(target.name + ".tmp")
    temporary.write_text(json.dumps(asdict(receipt), indent=2))
    os.replace(temporary, target)


def reusable_receipt(
    sidecar: Path, source_repo: str, source_sha: str, tool_version: str
) -> ExtractionReceipt | None:
    """The receipt of a complete earlier extraction of exactly this source commit, if any."""
    try:
        raw = json.loads(receipt_path(sidecar).read_text())
        receipt = ExtractionReceipt(**{**raw, "layer_indices": tuple(raw["layer_indices"])})
        size = sidecar.stat().st_size
    except (OSError, ValueError, TypeError, KeyError):
        return None
    matches = (
        receipt.source_repo == source_repo
        and receipt.source_sha == source_sha
        and receipt.tool_version == tool_version
        and receipt.size == size
    )
    return receipt if matches else None


def discard(sidecar: Path) -> None:
    """Remove the sidecar and its receipt (after a successful upload)."""
    sidecar.unlink(missing_ok=True)
    receipt_path(sidecar).unlink(missing_ok=True)
