"""The publish job as the job history stores it, so the monitor can show it and run it again.

Why: a publish started from the CLI or the GUI is recorded with its kind and parameters; a
failed one (a dropped upload, say) is retried from the monitor by rebuilding the same job from
those parameters. The parameters never hold a token — the job resolves it when it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.engine.hub.publish import PublishOptions, PublishResult, publish_sidecar
from app.engine.jobs import JobContext
from app.engine.publish_plan import MtpSidecarPlan
from app.engine.store import JobSpec

JOB_KIND = "publish"


def publish_job_spec(plan: MtpSidecarPlan, options: PublishOptions) -> JobSpec:
    params: dict[str, Any] = {
        "source_repo": plan.source_repo,
        "sidecar_repo": plan.sidecar_repo,
        "output_path": str(plan.output_path),
        "filename": plan.filename,
        "force": options.force,
        "endpoint": options.endpoint,
        "file_in_collection": options.file_in_collection,
        "source_revision": options.source_revision,
    }
    return JobSpec(JOB_KIND, f"Publish sidecar {plan.sidecar_repo}", params)


def publish_job_from_params(params: dict[str, Any]) -> Callable[[JobContext], PublishResult]:
    """The job a stored :class:`JobSpec` of kind ``publish`` describes."""
    plan = MtpSidecarPlan(
        source_repo=params["source_repo"],
        sidecar_repo=params["sidecar_repo"],
        output_path=Path(params["output_path"]),
        filename=params["filename"],
    )
    options = PublishOptions(
        force=bool(params.get("force", False)),
        endpoint=str(params.get("endpoint", "")),
        file_in_collection=bool(params.get("file_in_collection", True)),
        source_revision=str(params.get("source_revision", "main")),
    )
    return lambda ctx: publish_sidecar(plan, options, ctx)
