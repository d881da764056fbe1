"""MTP sidecar extraction: find a checkpoint's MTP heads and write them as one BF16 file.

One engine serves every source (a local folder, a Hub repo pinned to a commit) through the
:class:`CheckpointSource` protocol. Public API: :func:`detect_mtp` and :func:`extract_mtp`.
"""

from app.engine.mtp.detect import MtpDetection, MtpTensor, detect_mtp
from app.engine.mtp.extract import ExtractResult, extract_mtp, sidecar_metadata
from app.engine.mtp.header import StoredTensor
from app.engine.mtp.layouts import (
    LAYOUT_ERNIE,
    LAYOUT_MIMO,
    LAYOUT_NEXTN,
    LAYOUT_QWEN,
    no_heads_message,
)
from app.engine.mtp.source import CheckpointSource, LocalFolderSource

__all__ = [
    "LAYOUT_ERNIE",
    "LAYOUT_MIMO",
    "LAYOUT_NEXTN",
    "LAYOUT_QWEN",
    "CheckpointSource",
    "ExtractResult",
    "LocalFolderSource",
    "MtpDetection",
    "MtpTensor",
    "StoredTensor",
    "detect_mtp",
    "extract_mtp",
    "no_heads_message",
    "sidecar_metadata",
]
