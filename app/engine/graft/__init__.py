"""Grafting a sidecar's MTP head into a GGUF of its base model, so llama.cpp can draft with it.

Public API: :func:`graft_mtp` (the job: ``BASE.gguf + mtp.safetensors → OUT.gguf``),
:func:`check_graft` / :func:`plan_graft` (every check, nothing written), their results, and
:class:`GraftRequest` / :func:`graft_job_from_params` to record and retry it as a job.
"""

from app.engine.graft.graft import GraftResult, disk_free_bytes, graft_mtp
from app.engine.graft.job import GRAFT_KIND, GraftRequest, graft_job_from_params
from app.engine.graft.naming import SUPPORTED_ARCHITECTURES
from app.engine.graft.plan import GraftCheck, GraftPlan, check_graft, plan_graft
from app.engine.graft.quantise import HEAD_TYPES

__all__ = [
    "GRAFT_KIND",
    "HEAD_TYPES",
    "SUPPORTED_ARCHITECTURES",
    "GraftCheck",
    "GraftPlan",
    "GraftRequest",
    "GraftResult",
    "check_graft",
    "disk_free_bytes",
    "graft_job_from_params",
    "graft_mtp",
    "plan_graft",
]
