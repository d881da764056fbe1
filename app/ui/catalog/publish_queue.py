"""“Publish every missing sidecar”: one publish job per missing sidecar, run one after another.

Which sidecars are missing is what the sidecar status book last learnt from the Hub (a sidecar
never checked, or whose check failed, is not counted: refresh first). Entries that share a
sidecar repository (several quantisations of one base model) publish it once. The jobs run one
at a time — each downloads part of a large checkpoint and uploads a large file, so running them
side by side would only split the bandwidth and the scratch space — and every one shows in
Jobs with its own progress, cancel and history. Cancelling the queue drops the jobs not yet
started; the running one is cancelled from Jobs like any other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal

from app.engine.catalog import CatalogEntry
from app.engine.hub.job import publish_job_from_params, publish_job_spec
from app.engine.hub.publish import PublishOptions
from app.engine.publish_plan import ArtifactKind, plan_publish
from app.engine.scratch import resolve_scratch
from app.engine.settings import Settings
from app.ui.catalog.status import Published, SidecarCheck
from app.ui.jobs.runner import JobRunner


@dataclass(frozen=True)
class MissingSidecars:
    """Entries whose sidecar the Hub said it lacks (one per sidecar repo), and how many
    sidecars could not be told (never checked, or the Hub was unreachable)."""

    entries: tuple[CatalogEntry, ...]
    unknown: int


def missing_sidecars(
    entries: list[CatalogEntry], status: Callable[[str], SidecarCheck]
) -> MissingSidecars:
    found: dict[str, CatalogEntry] = {}
    unknown: set[str] = set()
    for entry in entries:
        repo = entry.mtp_sidecar_repo
        if not repo or not entry.mtp_source_repo or repo in found:
            continue
        published = status(repo).published
        if published is Published.NO:
            found[repo] = entry
        elif published is not Published.YES:
            unknown.add(repo)
    return MissingSidecars(tuple(found.values()), len(unknown))


class PublishQueue(QObject):
    """Runs publish jobs one at a time; ``changed`` whenever the queue moves."""

    changed = Signal()

    def __init__(
        self, runner: JobRunner, settings: Callable[[], Settings], parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self._runner = runner
        self._settings = settings
        self._waiting: list[CatalogEntry] = []
        self._current: int | None = None
        self.started_jobs: list[int] = []
        runner.job_finished.connect(self._on_finished)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @property
    def running(self) -> bool:
        return self._current is not None

    def summary(self) -> str:
        if self._current is None:
            return ""
        queued = f" · {len(self._waiting)} waiting" if self._waiting else ""
        return f"Publishing sidecars: job {self._current} running{queued}"

    def enqueue(self, entries: tuple[CatalogEntry, ...]) -> None:
        queued = {entry.mtp_sidecar_repo for entry in self._waiting}
        self._waiting.extend(e for e in entries if e.mtp_sidecar_repo not in queued)
        self._start_next()

    def cancel_waiting(self) -> None:
        self._waiting.clear()
        self.changed.emit()

    def _start_next(self) -> None:
        if self._current is None and self._waiting:
            entry = self._waiting.pop(0)
            settings = self._settings()
            plan = plan_publish(
                entry, (ArtifactKind.MTP,), resolve_scratch(settings.scratch_dir or None)
            )
            assert plan.mtp is not None  # missing_sidecars keeps entries with both repos only
            options = PublishOptions(
                force=False,
                endpoint=settings.endpoint,
                file_in_collection=settings.file_in_collection,
            )
            spec = publish_job_spec(plan.mtp, options)
            self._current = self._runner.start(spec, publish_job_from_params(spec.params))
            self.started_jobs.append(self._current)
        self.changed.emit()

    def _on_finished(self, job_id: int, _state: str, _message: str) -> None:
        if job_id == self._current:
            self._current = None
            self._start_next()
