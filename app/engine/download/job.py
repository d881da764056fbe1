"""A download as a job: pin, check space, fetch with resume, verify, then give files their names.

Order matters for "never a half file in place of a model": bytes go to a partial file, the
partial is verified (size + SHA-256 or git id), and only then renamed to its final name. A
cancelled, paused, failed or killed download keeps its partial files, and running the same
request again continues from the byte reached.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout
from huggingface_hub import hf_hub_url
from huggingface_hub.utils import build_hf_headers

from app.engine.download.fetch import FetchCallbacks, FetchPolicy, fetch_to_partial, partial_size
from app.engine.download.layout import CacheLayout, FolderLayout, Layout
from app.engine.download.pause import PauseToken
from app.engine.download.plan import DownloadPlan, RemoteFile, plan_download
from app.engine.download.request import CACHE, DownloadRequest
from app.engine.download.space import check_free_space
from app.engine.download.verify import verify_partial
from app.engine.errors import DownloadError
from app.engine.jobs import JobContext, ProgressReporter, ResultEvent
from app.engine.units import format_bytes


@dataclass(frozen=True)
class DownloadResult:
    repo_id: str
    commit: str
    location: Path
    files: tuple[str, ...]
    downloaded_bytes: int
    reused_bytes: int
    seconds: float

    def summary(self) -> dict[str, Any]:
        return {
            "repo": self.repo_id,
            "commit": self.commit,
            "location": str(self.location),
            "files": len(self.files),
            "downloaded_bytes": self.downloaded_bytes,
            "reused_bytes": self.reused_bytes,
            "seconds": round(self.seconds, 2),
        }


def layout_for(request: DownloadRequest, plan: DownloadPlan) -> Layout:
    destination = Path(request.destination).expanduser()
    if request.layout == CACHE:
        return CacheLayout(destination, plan.repo_id, plan.revision, plan.commit)
    return FolderLayout(destination)


class DownloadJob:
    """Callable with a :class:`JobContext`; :meth:`pause` and :meth:`resume` work while it runs."""

    def __init__(self, request: DownloadRequest, policy: FetchPolicy | None = None) -> None:
        self.request = request
        self._policy = policy or FetchPolicy()
        self._pause = PauseToken()

    def pause(self) -> None:
        self._pause.pause()

    def resume(self) -> None:
        self._pause.resume()

    @property
    def paused(self) -> bool:
        return self._pause.paused

    def __call__(self, ctx: JobContext) -> DownloadResult:
        started = time.monotonic()
        request = self.request
        ctx.stage("pin", f"{request.repo_id}@{request.revision}")
        plan = plan_download(request)
        ctx.log(
            f"{request.repo_id} at {request.revision} is commit {plan.commit[:12]}: "
            f"{len(plan.files)} file(s), {format_bytes(plan.total_bytes)}"
        )
        layout = layout_for(request, plan)
        todo = [file for file in plan.files if not layout.is_complete(file)]
        reused = plan.total_bytes - sum(file.size for file in todo)
        already = sum(partial_size(layout.partial_path(file)) for file in todo)

        ctx.stage("space", str(layout.root))
        needed = sum(file.size for file in todo) - already
        free = check_free_space(layout.root, needed)
        ctx.log(f"needs {format_bytes(needed)}, {format_bytes(free)} free in {layout.root}")
        if already:
            ctx.log(f"resuming: {format_bytes(already)} already downloaded")

        progress = ctx.progress_reporter("download", plan.total_bytes)
        progress.update(reused + already)
        headers = build_hf_headers(library_name="mtp-studio")
        for file in todo:
            self._fetch_one(ctx, request, plan, layout, file, progress, headers)
        location = layout.finish()
        result = DownloadResult(
            repo_id=plan.repo_id,
            commit=plan.commit,
            location=location,
            files=tuple(file.path for file in plan.files),
            downloaded_bytes=plan.total_bytes - reused - already,
            reused_bytes=reused,
            seconds=time.monotonic() - started,
        )
        ctx.emit(ResultEvent(result.summary()))
        return result

    def _fetch_one(
        self,
        ctx: JobContext,
        request: DownloadRequest,
        plan: DownloadPlan,
        layout: Layout,
        file: RemoteFile,
        progress: ProgressReporter,
        headers: dict[str, str],
    ) -> None:
        lock_path = layout.lock_path(file)
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(lock_path)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            raise DownloadError(
                f"another download of {file.path} into {layout.root} is running (lock "
                f"{lock_path}); wait for it to finish, then run this download again"
            ) from None
        try:
            partial = layout.partial_path(file)
            if not layout.blob_ready(file):
                ctx.stage("download", file.path)
                url = hf_hub_url(
                    plan.repo_id, file.path, revision=plan.commit, endpoint=request.endpoint
                )
                fetch_to_partial(
                    url,
                    partial,
                    file.size,
                    headers,
                    ctx.cancel,
                    self._pause,
                    self._callbacks(ctx, file, progress),
                    self._policy,
                )
                ctx.check_cancelled()
                ctx.stage("verify", file.path)
                verify_partial(partial, file, lambda _count: ctx.check_cancelled())
            layout.publish(file, partial)
            progress.update(progress.done)
        finally:
            lock.release()

    def _callbacks(
        self, ctx: JobContext, file: RemoteFile, progress: ProgressReporter
    ) -> FetchCallbacks:
        def on_pause_change(paused: bool) -> None:
            if paused:
                ctx.stage("paused", f"{file.path}: partial file kept, resume to continue")
            else:
                ctx.stage("download", file.path)

        return FetchCallbacks(
            on_bytes=progress.advance,
            on_rewind=lambda count: progress.update(progress.done - count),
            log=ctx.log,
            on_pause_change=on_pause_change,
        )


def download_job_from_params(params: dict[str, Any]) -> DownloadJob:
    """The factory the job store uses to retry a download from its stored parameters."""
    return DownloadJob(DownloadRequest.from_params(params))
