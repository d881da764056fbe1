"""One job's live progress: stage, a bar, bytes, speed and time left, and its log.

Shared by the job monitor's detail area and the wizards' run pages, so a download or publish
looks the same wherever it is watched. The log is always rendered from the job store (which
records each event before the GUI hears of it), so a line is never shown twice or missed,
whether the view followed the job from its start or opened it from history.
"""

from __future__ import annotations

import html
import json
import time

from PySide6.QtGui import QFont
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QProgressBar, QVBoxLayout, QWidget

from app.engine.jobs import JobEvent, ProgressEvent
from app.engine.store import JobState, StoredEvent
from app.ui.jobs.model import JobRow, JobTableModel, state_text
from app.ui.jobs.results import result_line
from app.ui.jobs.runner import JobRunner
from app.ui.look.tones import tone_style
from app.ui.wording import in_window_words

NOTHING_SELECTED = (
    "No job selected. Downloads and publishes appear in the list with their progress, and stay "
    "there after a restart."
)


def log_line(event: StoredEvent) -> str:
    stamp = time.strftime("%H:%M:%S", time.localtime(event.at))
    if event.kind == "result":
        return f"{stamp} ✔ {result_line(json.loads(event.text))}"
    prefix = {"stage": "▸ ", "error": "✖ "}.get(event.kind, "  ")
    marker = "⚠ " if event.level == "warning" else ""
    return f"{stamp} {prefix}{marker}{in_window_words(event.text)}"


class JobProgressView(QWidget):
    """Follows the job given to :meth:`follow`; shows an explanation until then."""

    def __init__(
        self,
        runner: JobRunner,
        jobs: JobTableModel,
        show_log: bool = True,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._runner = runner
        self._jobs = jobs
        self._row: JobRow | None = None
        self._last_seq = 0
        self.stage_label = QLabel(NOTHING_SELECTED)
        self.stage_label.setWordWrap(True)
        self.bar = QProgressBar()
        self.bar.setRange(0, 100)
        self.figures_label = QLabel("")
        self.log_view = QPlainTextEdit()
        self.log_view.setReadOnly(True)
        self.log_view.setMaximumBlockCount(5000)
        self.log_view.setFont(QFont("monospace"))
        self.log_view.setVisible(show_log)
        self.log_view.setPlaceholderText("The job's log appears here.")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for widget in (self.stage_label, self.bar, self.figures_label, self.log_view):
            layout.addWidget(widget)
        runner.job_events.connect(self._on_events)
        runner.job_finished.connect(self._on_finished)
        jobs.dataChanged.connect(self._on_rows_changed)  # a bound slot: dropped with the view
        self._refresh()

    @property
    def job_id(self) -> int | None:
        return self._row.job_id if self._row else None

    def follow(self, job_id: int | None) -> None:
        """Show job ``job_id`` (its live row in the job table) with its log."""
        self._row = None if job_id is None else self._jobs.job(job_id)
        self._last_seq = 0
        self.log_view.clear()
        self._append_new_lines()
        self._refresh()

    def _append_new_lines(self) -> None:
        if self._row is None:
            return
        for event in self._runner.store.events(self._row.job_id, self._last_seq):
            self.log_view.appendPlainText(log_line(event))
            self._last_seq = event.seq

    def _on_rows_changed(self, *_changed: object) -> None:
        self._refresh()

    def _on_events(self, job_id: int, events: list[JobEvent]) -> None:
        ours = self._row is not None and job_id == self._row.job_id
        if ours and any(not isinstance(event, ProgressEvent) for event in events):
            self._append_new_lines()

    def _on_finished(self, job_id: int, _state: str, _message: str) -> None:
        if self._row is not None and job_id == self._row.job_id:
            self._append_new_lines()

    def _refresh(self) -> None:
        row = self._row
        self.bar.setVisible(row is not None)
        if row is None:
            self.stage_label.setText(NOTHING_SELECTED)
            self.figures_label.setText("")
            return
        state = state_text(row)
        running_stage = row.state is JobState.RUNNING and row.stage and row.stage != state
        headline = f"<b>{html.escape(row.record.spec.title)}</b><br>{state}"
        if running_stage:
            headline += f" — {html.escape(row.stage)}"
        if row.error:
            error = html.escape(in_window_words(row.error))
            headline += f"<br><span style='{tone_style('error')}'>{error}</span>"
        self.stage_label.setText(headline)
        self.bar.setValue(row.percent)
        figures = [row.amount_text(), row.speed_text()]
        if row.eta_text():
            figures.append(f"{row.eta_text()} left")
        self.figures_label.setText("  ·  ".join(part for part in figures if part))
