"""A download as a job: pin, check space, fetch with resume, verify, then give files their names.

Order matters for "never a half file in place of a model": bytes go to a partial file, the
partial is verified (size + SHA-256 or git id), and only then renamed to its final name. A
cancelled, paused, failed or killed download keeps its partial files, and running the same
request again continues from the byte reached.

Entries the plan or the layout refuse (an unsafe name or id from the server) are never fetched:
the safe files are downloaded, then the job fails with a message that lists every skipped entry,
so the command exits non-zero and the monitor shows the download as failed, not done.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout
from huggingface_hub import hf_hub_url
from huggingface_hub.utils import build_hf_headers

from app.engine.download.fetch import FetchCallbacks, FetchPolicy, fetch_to_partial, partial_size
from app.engine.download.layout import CacheLayout, FolderLayout, Layout
from app.engine.download.pause import PauseToken
from app.engine.download.plan import DownloadPlan, RefusedEntry, RemoteFile, plan_download
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
        refused = list(plan.refused)
        refused += [
            RefusedEntry(file.path, problem)
            for file in plan.files
            if (problem := layout.entry_problem(file)) is not None
        ]
        for entry in refused:
            ctx.log(f"refused {entry.describe()}; it will not be downloaded")
        skipped = {entry.path for entry in refused}
        safe = [file for file in plan.files if file.path not in skipped]
        total = sum(file.size for file in safe)
        todo = [file for file in safe if not layout.is_complete(file)]
        reused = total - sum(file.size for file in todo)
        already = sum(partial_size(layout.partial_path(file)) for file in todo)
        if (stray := _stray_partials(layout, plan.files)) is not None:
            ctx.log(stray)

        ctx.stage("space", str(layout.root))
        needed = sum(file.size for file in todo) - already
        free = check_free_space(layout.root, needed)
        ctx.log(f"needs {format_bytes(needed)}, {format_bytes(free)} free in {layout.root}")
        if already:
            ctx.log(f"resuming: {format_bytes(already)} already downloaded")

        progress = ctx.progress_reporter("download", total)
        progress.update(reused + already)
        headers = build_hf_headers(library_name="mtp-studio")
        for file in todo:
            self._fetch_one(ctx, request, plan, layout, file, progress, headers)
        location = layout.finish()
        if refused:
            raise DownloadError(_refused_message(request, plan, refused, safe, location))
        result = DownloadResult(
            repo_id=plan.repo_id,
            commit=plan.commit,
            location=location,
            files=tuple(file.path for file in safe),
            downloaded_bytes=total - reused - already,
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


def _refused_message(
    request: DownloadRequest,
    plan: DownloadPlan,
    refused: list[RefusedEntry],
    downloaded: list[RemoteFile],
    location: Path,
) -> str:
    entries = "; ".join(entry.describe() for entry in refused)
    return (
        f"{request.endpoint} lists {len(refused)} unsafe entr{'y' if len(refused) == 1 else 'ies'} "
        f"in {plan.repo_id}, refused and not downloaded: {entries}. The other "
        f"{len(downloaded)} file(s) are verified and in {location}. Nothing was written outside "
        "it; if you trust this repo, ask its owner to rename those files, otherwise check the "
        "Hub endpoint in Settings"
    )


def download_job_from_params(params: dict[str, Any]) -> DownloadJob:
    """The factory the job store uses to retry a download from its stored parameters."""
    return DownloadJob(DownloadRequest.from_params(params))


def _stray_partials(layout: Layout, files: Sequence[RemoteFile]) -> str | None:
    """A line about partial files in ``layout``'s work folder that this download will not
    resume (left by an interrupted download of other files or another revision), or None."""
    if not files:
        return None
    ours = {layout.partial_path(file) for file in files}
    folder = next(iter(ours)).parent
    try:
        stray = [p for p in folder.glob("*.incomplete") if p not in ours and p.is_file()]
    except OSError:
        return None
    if not stray:
        return None
    size = sum(p.stat().st_size for p in stray)
    return (
        f"{len(stray)} partial file(s) ({format_bytes(size)}) in {folder} are left from an "
        "interrupted download of other files or another revision; run that download again to "
        "resume them, or delete them to free the space"
    )
