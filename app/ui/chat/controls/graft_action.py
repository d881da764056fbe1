"""The chat window's "Add the MTP head from <sidecar>" action, from the click to the loaded copy.

llama.cpp drafts only with a head inside the GGUF; a downloaded GGUF paired with a sidecar can
get one by grafting. The action checks the pair in the background (nothing written), asks before
writing a copy of the model, runs the graft as an ordinary recorded job (so the Jobs panel shows
its progress, cancel and history), and reports the finished file so the window can select and
load it. Nothing here waits on the GUI thread.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QMessageBox, QWidget

from app.engine.chat.model_files import ModelDescription
from app.engine.graft import GraftCheck, check_graft
from app.engine.graft.job import GraftRequest, default_output_path
from app.engine.jobs import JobEvent, ProgressEvent
from app.engine.store import JobState
from app.engine.units import format_bytes
from app.ui.background import run_in_background
from app.ui.errors import readable
from app.ui.jobs.runner import JobRunner


class GraftAction(QObject):
    """Signals: ``started``, ``progress(percent)``, ``grafted(path)`` and ``failed(message)``."""

    started = Signal()
    progress = Signal(int)
    grafted = Signal(object)
    failed = Signal(str)

    def __init__(self, runner: JobRunner, grafted_dir: Path, parent: QWidget) -> None:
        super().__init__(parent)
        self._runner = runner
        self._grafted_dir = grafted_dir
        self._parent = parent
        self._request: GraftRequest | None = None
        self.job_id: int | None = None
        self.confirmation: QMessageBox | None = None
        runner.job_events.connect(self._on_events)
        runner.job_finished.connect(self._on_finished)

    @property
    def running(self) -> bool:
        return self.job_id is not None

    def ask(self, model: ModelDescription) -> None:
        """Check ``model`` + its sidecar off the GUI thread, then ask before writing."""
        if self.running or model.sidecar is None:
            return
        base, sidecar = model.path, model.sidecar
        run_in_background(
            lambda: check_graft(base, sidecar),
            lambda check: self._confirm(model, check),
            lambda exc: self.failed.emit(f"Cannot add the MTP head: {readable(exc)}"),
        )

    def _confirm(self, model: ModelDescription, check: GraftCheck) -> None:
        if check.problem is not None or check.plan is None:
            self.failed.emit(
                f"The MTP head of {model.sidecar} does not fit {model.name}: {check.problem}"
            )
            return
        plan = check.plan
        out = default_output_path(model.path, self._grafted_dir)
        replaces = " (replacing the file there)" if out.exists() else ""
        box = QMessageBox(
            QMessageBox.Icon.Question,
            "Add the MTP head",
            f"Write a copy of {model.name} with the MTP head of {model.sidecar.name} added?",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
            self._parent,
        )
        box.setInformativeText(
            f"{plan.architecture}: {plan.trunk_blocks} blocks + {plan.head_blocks} MTP block(s), "
            f"head {format_bytes(plan.head_bytes)} as {plan.head_type}.\n"
            f"New file: {out}{replaces}, about {format_bytes(plan.estimated_bytes)}.\n"
            "The original stays as it is."
        )
        box.button(QMessageBox.StandardButton.Yes).setText("Add the head")
        box.accepted.connect(lambda: self.start(GraftRequest(model.path, model.sidecar, out)))
        self.confirmation = box
        box.open()

    def start(self, request: GraftRequest) -> int:
        """Run ``request`` as a recorded job (the output folder is created if needed)."""
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
            self.grafted.emit(request.out)
        elif state == JobState.CANCELLED:
            self.failed.emit("Adding the MTP head was cancelled; no file was written.")
        else:
            self.failed.emit(f"Adding the MTP head failed: {message}")
