"""Grafting a sidecar's MTP head into a GGUF of its base model, so llama.cpp can draft with it.

Public API: :func:`graft_mtp` (the job: ``BASE.gguf + mtp.safetensors → OUT.gguf``),
:func:`check_graft` / :func:`plan_graft` (every check, nothing written), and their results.
"""

from app.engine.graft.graft import GraftResult, disk_free_bytes, graft_mtp
from app.engine.graft.naming import SUPPORTED_ARCHITECTURES
from app.engine.graft.plan import GraftCheck, GraftPlan, check_graft, plan_graft
from app.engine.graft.quantise import HEAD_TYPES

__all__ = [
    "HEAD_TYPES",
    "SUPPORTED_ARCHITECTURES",
    "GraftCheck",
    "GraftPlan",
    "GraftResult",
    "check_graft",
    "disk_free_bytes",
    "graft_mtp",
    "plan_graft",
]
