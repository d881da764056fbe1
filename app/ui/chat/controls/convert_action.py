"""The chat's "Convert for MLX…" action: an FP8 checkpoint mlx-lm refused, made loadable.

mlx-lm cannot load FP8 checkpoints. The banner that says so offers this action: it asks which
copy to write (BF16, exact; or quantised for MLX at 4 or 8 bits, smaller and faster, with the
MTP head kept beside it), runs the conversion as an ordinary recorded job (progress, cancel and
history on the Jobs page) and reports the finished folder so the chat can open it. Nothing here
waits on the GUI thread; the dialog is window-modal and the job runs in the job runner.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QMessageBox, QPushButton, QWidget

from app.engine.convert.fp8_check import model_name
from app.engine.convert.job import ConvertRequest, default_output_folder
from app.engine.jobs import JobEvent, ProgressEvent
from app.engine.store import JobState
from app.ui.jobs.runner import JobRunner

CHOICES: tuple[tuple[str, int | None, str], ...] = (
    ("MLX 4-bit", 4, "about a quarter of BF16's size; fastest"),
    ("MLX 8-bit", 8, "about half of BF16's size; closest to the original"),
    ("BF16", None, "exact dequantisation, twice the FP8 size"),
)


class ConvertAction(QObject):
    """Signals: ``started``, ``progress(percent)``, ``converted(folder)``, ``failed(message)``."""

    started = Signal()
    progress = Signal(int)
    converted = Signal(object)
    failed = Signal(str)

    def __init__(self, runner: JobRunner, converted_dir: Path, parent: QWidget) -> None:
        super().__init__(parent)
        self._runner = runner
        self._converted_dir = converted_dir
        self._parent = parent
        self._request: ConvertRequest | None = None
        self.job_id: int | None = None
        self.confirmation: QMessageBox | None = None
        runner.job_events.connect(self._on_events)
        runner.job_finished.connect(self._on_finished)

    @property
    def running(self) -> bool:
        return self.job_id is not None

    def ask(self, source: Path) -> QMessageBox | None:
        """Ask which copy of the FP8 checkpoint ``source`` to write (nothing written yet)."""
        if self.running:
            return None
        name = model_name(source)
        box = QMessageBox(
            QMessageBox.Icon.Question,
            "Convert for MLX",
            f"Write a copy of {name} that mlx-lm can load?",
            QMessageBox.StandardButton.Cancel,
            self._parent,
        )
        lines = ["The FP8 weights are dequantised to BF16 exactly; the original stays as it is."]
        for label, bits, why in CHOICES:
            out = default_output_folder(source, bits, self._converted_dir)
            button = box.addButton(label, QMessageBox.ButtonRole.AcceptRole)
            self._start_on_click(button, ConvertRequest(source, out, bits))
            lines.append(f"• {label} ({out.name}): {why}")
        lines.append(f"Written into {out.parent}; progress on the Jobs page.")
        box.setInformativeText("\n".join(lines))
        self.confirmation = box
        box.open()
        return box

    def _start_on_click(self, button: QPushButton, request: ConvertRequest) -> None:
        button.clicked.connect(lambda _checked=False: self.start(request))

    def choice_button(self, label: str) -> QPushButton:
        """The open dialog's button for ``label`` (what a test clicks)."""
        assert self.confirmation is not None
        return next(
            button
            for button in self.confirmation.buttons()
            if isinstance(button, QPushButton) and button.text() == label
        )

    def start(self, request: ConvertRequest) -> int:
        """Run ``request`` as a recorded job (the output's parent folder is created if needed)."""
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
            self.converted.emit(request.out)
        elif state == JobState.CANCELLED:
            self.failed.emit("The conversion was cancelled; nothing was written.")
        else:
            self.failed.emit(f"The conversion failed: {message}")
