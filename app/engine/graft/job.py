"""A graft as a stored job: its parameters as JSON, and the job rebuilt from them.

The CLI and the GUI record a graft in the job history with :func:`graft_spec`; the job monitor's
"retry" rebuilds it with :func:`graft_job_from_params` (registered in the job store's kinds), so
a cancelled or failed graft runs again exactly as it was asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.engine.graft.graft import GraftResult, graft_mtp
from app.engine.jobs import JobContext
from app.engine.store.records import JobSpec

GRAFT_KIND = "graft"


def graft_spec(
    base: Path, sidecar: Path, out: Path, head_type: str = "q8_0", replace: bool = False
) -> JobSpec:
    """The job-history record of a graft (paths as given, so a retry writes the same file)."""
    params = {
        "base": str(base),
        "sidecar": str(sidecar),
        "out": str(out),
        "head_type": head_type,
        "replace": replace,
    }
    title = f"Graft the MTP head of {Path(sidecar).name} into {Path(base).name}"
    return JobSpec(GRAFT_KIND, title, params)


def graft_job_from_params(params: dict[str, Any]) -> Callable[[JobContext], GraftResult]:
    """The factory the job store uses to run (or retry) a graft from its stored parameters."""
    base, sidecar, out = Path(params["base"]), Path(params["sidecar"]), Path(params["out"])
    head_type, replace = str(params.get("head_type", "q8_0")), bool(params.get("replace", False))

    def job(ctx: JobContext) -> GraftResult:
        return graft_mtp(base, sidecar, out, head_type, replace, ctx)

    return job
