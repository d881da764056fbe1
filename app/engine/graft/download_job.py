"""Download a GGUF repo's files and its sidecar, then graft the head into every GGUF fetched.

Offered by the download wizard for a catalog entry whose GGUF repo has a sidecar repo: one job
instead of three manual steps, so the model drafts the first time it is opened. The downloads
are the ordinary resumable download jobs (pause and resume reach whichever is running), and a
GGUF the head does not fit is skipped with the reason in the log rather than failing the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.engine.download import DownloadJob, DownloadRequest, DownloadResult
from app.engine.errors import GraftError
from app.engine.graft.job import GraftRequest, default_output_path
from app.engine.graft.plan import check_graft
from app.engine.jobs import JobContext, ResultEvent

DOWNLOAD_GRAFT_KIND = "download_graft"
SIDECAR_FILE = "mtp.safetensors"


@dataclass(frozen=True)
class DownloadGraftResult:
    model: DownloadResult
    sidecar: Path
    grafted: tuple[Path, ...]
    skipped: tuple[str, ...]

    def summary(self) -> dict[str, Any]:
        return {
            **self.model.summary(),
            "sidecar": str(self.sidecar),
            "grafted": [str(path) for path in self.grafted],
            "skipped": list(self.skipped),
        }


class DownloadGraftJob:
    """Callable with a :class:`JobContext`; pausable while one of its downloads runs."""

    def __init__(
        self,
        model: DownloadRequest,
        sidecar: DownloadRequest,
        grafted_dir: Path,
        head_type: str = "q8_0",
    ) -> None:
        self.model = model
        self.sidecar = sidecar
        self.grafted_dir = Path(grafted_dir)
        self.head_type = head_type
        self._downloads = (DownloadJob(model), DownloadJob(sidecar))

    @property
    def title(self) -> str:
        return f"Download {self.model.repo_id} with the MTP head of {self.sidecar.repo_id}"

    def to_params(self) -> dict[str, Any]:
        return {
            "model": self.model.to_params(),
            "sidecar": self.sidecar.to_params(),
            "grafted_dir": str(self.grafted_dir),
            "head_type": self.head_type,
        }

    def pause(self) -> None:
        for download in self._downloads:
            download.pause()

    def resume(self) -> None:
        for download in self._downloads:
            download.resume()

    @property
    def paused(self) -> bool:
        return any(download.paused for download in self._downloads)

    def __call__(self, ctx: JobContext) -> DownloadGraftResult:
        model_job, sidecar_job = self._downloads
        model = model_job(ctx)
        side = sidecar_job(ctx)
        sidecar = side.location / SIDECAR_FILE
        if not sidecar.is_file():
            raise GraftError(
                f"{self.sidecar.repo_id} has no {SIDECAR_FILE} at commit {side.commit[:12]}; "
                "check the catalog entry's mtp_sidecar_repo"
            )
        grafted: list[Path] = []
        skipped: list[str] = []
        ggufs = [name for name in model.files if name.lower().endswith(".gguf")]
        for name in ggufs:
            base = model.location / name
            check = check_graft(base, sidecar)
            if check.problem is not None:
                skipped.append(f"{name}: {check.problem}")
                ctx.log(f"not grafted: {name}: {check.problem}", level="warning")
                continue
            out = default_output_path(base, self.grafted_dir)
            out.parent.mkdir(parents=True, exist_ok=True)
            GraftRequest(base, sidecar, out, self.head_type).run(ctx)
            grafted.append(out)
        if not grafted:
            reasons = "; ".join(skipped) or f"{self.model.repo_id} has no .gguf file"
            raise GraftError(f"the files were downloaded but no GGUF took the head: {reasons}")
        result = DownloadGraftResult(model, sidecar, tuple(grafted), tuple(skipped))
        ctx.emit(ResultEvent(result.summary()))
        return result


def download_graft_job_from_params(params: dict[str, Any]) -> DownloadGraftJob:
    try:
        return DownloadGraftJob(
            DownloadRequest.from_params(params["model"]),
            DownloadRequest.from_params(params["sidecar"]),
            Path(params["grafted_dir"]),
            str(params.get("head_type", "q8_0")),
        )
    except KeyError as exc:
        raise GraftError(f"the stored job lacks its {exc.args[0]!r} parameter") from None
