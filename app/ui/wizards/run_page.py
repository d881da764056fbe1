"""The last-but-one page both wizards share: start a job, follow it live, cancel it.

A wizard's run page is the same thing each time — a job started through the runner, its
progress view (bytes, speed, time left, log), a Cancel button and a Close button that leaves the
job running in the monitor — so it lives here once; each wizard adds what is its own (the
download's Pause button, the publish's list of stages) through ``buttons`` and the hooks.
"""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QPushButton, QVBoxLayout, QWidget, QWizard, QWizardPage

from app.engine.errors import MtpStudioError
from app.engine.jobs import JobEvent
from app.engine.store import JobSpec
from app.engine.store.kinds import JobFunction
from app.ui.errors import readable
from app.ui.jobs.model import JobTableModel
from app.ui.jobs.progress import JobProgressView
from app.ui.jobs.runner import JobRunner


class JobRunPage(QWizardPage):
    """Starts a job in ``initializePage`` (through ``start``) and follows it to its end."""

    def __init__(
        self,
        runner: JobRunner,
        jobs: JobTableModel,
        *,
        title: str,
        subtitle: str,
        cancel_text: str,
        above_progress: QWidget | None = None,
    ) -> None:
        super().__init__()
        self.runner = runner
        self.job_id: int | None = None
        self.state = ""
        self.message = ""
        self.setTitle(title)
        self.setSubTitle(subtitle)
        self.setButtonText(QWizard.WizardButton.CancelButton, "Close")
        self.progress = JobProgressView(runner, jobs)
        self.cancel_button = QPushButton(cancel_text)
        self.cancel_button.clicked.connect(self._cancel)
        self.buttons = QHBoxLayout()
        self.buttons.addWidget(self.cancel_button)
        self.buttons.addStretch(1)
        layout = QVBoxLayout(self)
        if above_progress is not None:
            layout.addWidget(above_progress)
        layout.addWidget(self.progress, 1)
        layout.addLayout(self.buttons)
        runner.job_events.connect(self._on_events)
        runner.job_finished.connect(self._on_finished)

    def start(self, spec: JobSpec, job: JobFunction) -> None:
        """Start the job and follow it; a refusal (e.g. a busy scratch) shows on the page."""
        self.state = self.message = ""
        try:
            self.job_id = self.runner.start(spec, job)
        except MtpStudioError as exc:
            self.progress.stage_label.setText(readable(exc))
            return
        self.progress.follow(self.job_id)

    def isComplete(self) -> bool:
        return bool(self.state)

    def job_events(self, events: list[JobEvent]) -> None:
        """Hook: this page's job reported events."""

    def job_finished(self, state: str, message: str) -> None:
        """Hook: this page's job ended (``state`` is a ``JobState`` value)."""

    def _cancel(self) -> None:
        if self.job_id is not None:
            self.runner.cancel(self.job_id)

    def _on_events(self, job_id: int, events: list[JobEvent]) -> None:
        if job_id == self.job_id:
            self.job_events(events)

    def _on_finished(self, job_id: int, state: str, message: str) -> None:
        if job_id != self.job_id:
            return
        self.state, self.message = state, message
        self.cancel_button.setEnabled(False)
        self.job_finished(state, message)
        self.completeChanged.emit()
