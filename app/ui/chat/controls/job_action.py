"""A chat action that writes a new model as a recorded job: ask first, run, report the result.

Grafting an MTP head into a GGUF and converting an FP8 checkpoint for MLX are the same story told
about two engine jobs: a window-modal question says what will be written, the work runs as an
ordinary job (progress, cancel and history on the Jobs page), and the finished file or folder is
reported so the chat can open it. This class tells the story once; a subclass says only what it
asks and how its outcome reads (:attr:`JobAction.wording`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QMessageBox, QPushButton, QWidget

from app.engine.jobs import JobContext, JobEvent, ProgressEvent
from app.engine.store import JobSpec, JobState
from app.ui.jobs.runner import JobRunner


class ModelWritingRequest(Protocol):
    """What a graft or conversion request offers: where it writes, its job spec, its work."""

    @property
    def out(self) -> Path: ...

    def spec(self) -> JobSpec: ...

    def run(self, ctx: JobContext) -> object: ...


@dataclass(frozen=True)
class Wording:
    """How the action's outcomes read: ``cancelled`` in full, ``failed`` before the reason."""

    cancelled: str
    failed: str


class JobAction(QObject):
    """Signals: ``started``, ``progress(percent)``, ``succeeded(path)``, ``failed(message)``."""

    started = Signal()
    progress = Signal(int)
    succeeded = Signal(object)
    failed = Signal(str)

    wording = Wording("The job was cancelled; nothing was written.", "The job failed")

    def __init__(self, runner: JobRunner, out_dir: Path, parent: QWidget) -> None:
        super().__init__(parent)
        self._runner = runner
        self._out_dir = out_dir
        self._parent = parent
        self._request: ModelWritingRequest | None = None
        self.job_id: int | None = None
        self.confirmation: QMessageBox | None = None
        runner.job_events.connect(self._on_events)
        runner.job_finished.connect(self._on_finished)

    @property
    def running(self) -> bool:
        return self.job_id is not None

    def _question(self, title: str, text: str, buttons: QMessageBox.StandardButton) -> QMessageBox:
        """A window-modal question on the action's window (kept as :attr:`confirmation`)."""
        box = QMessageBox(QMessageBox.Icon.Question, title, text, buttons, self._parent)
        self.confirmation = box
        return box

    def start_on_click(self, button: QPushButton, request: ModelWritingRequest) -> None:
        button.clicked.connect(lambda _checked=False: self.start(request))

    def choice_button(self, label: str) -> QPushButton:
        """The open question's button labelled ``label`` (what a test clicks)."""
        assert self.confirmation is not None
        return next(
            button
            for button in self.confirmation.buttons()
            if isinstance(button, QPushButton) and button.text() == label
        )

    def start(self, request: ModelWritingRequest) -> int:
        """Run ``request`` as a recorded job (the output's folder is created if needed)."""
        request.out.parent.mkdir(parents=True, exist_ok=True)
        self._request = request
        self.job_id = self._runner.start(request.spec(), request.run)
        self.started.emit()
        return self.job_id

    def cancel(self) -> None:
        if self.job_id is not None:
            self._runner.cancel(self.job_id)

    def _on_events(self, job_id: int, events: list[JobEvent]) -> None:
        if job_id != self.job_id:
            return
        for event in events:
            if isinstance(event, ProgressEvent) and event.total:
                self.progress.emit(int(100 * event.done / event.total))

    def _on_finished(self, job_id: int, state: str, message: str) -> None:
        if job_id != self.job_id or self._request is None:
            return
        request, self.job_id, self._request = self._request, None, None
        if state == JobState.SUCCEEDED:
            self.succeeded.emit(request.out)
        elif state == JobState.CANCELLED:
            self.failed.emit(self.wording.cancelled)
        else:
            self.failed.emit(f"{self.wording.failed}: {message}")
