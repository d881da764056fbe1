"""One job's live progress: stage, a bar, bytes, speed and time left, and its log.

Shared by the job monitor's detail area and the wizards' run pages, so a download or publish
looks the same wherever it is watched.
"""

from __future__ import annotations

import time

from PySide6.QtGui import QFont
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QProgressBar, QVBoxLayout, QWidget

from app.engine.jobs import JobEvent, LogEvent, ResultEvent, StageEvent
from app.engine.store import JobState, StoredEvent
from app.ui.jobs.model import JobRow, JobTableModel
from app.ui.jobs.runner import JobRunner


class JobProgressView(QWidget):
    """Follows the job given to :meth:`follow`; shows nothing-selected text until then."""

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
        self.stage_label = QLabel("No job selected.")
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

    @property
    def job_id(self) -> int | None:
        return self._row.job_id if self._row else None

    def follow(self, job_id: int | None) -> None:
        """Show job ``job_id`` (its live row in the job table) with its stored log."""
        self._row = None if job_id is None else self._jobs.job(job_id)
        self.log_view.clear()
        if self._row is not None:
            for event in self._runner.store.events(self._row.job_id):
                self._append_stored(event)
        self._refresh()

    def _append_stored(self, event: StoredEvent) -> None:
        stamp = time.strftime("%H:%M:%S", time.localtime(event.at))
        prefix = {"stage": "▸ ", "error": "✖ ", "result": "✔ "}.get(event.kind, "  ")
        self.log_view.appendPlainText(f"{stamp} {prefix}{event.text}")

    def _on_rows_changed(self, *_changed: object) -> None:
        self._refresh()

    def _on_events(self, job_id: int, events: list[JobEvent]) -> None:
        if self._row is None or job_id != self._row.job_id:
            return
        stamp = time.strftime("%H:%M:%S")
        for event in events:
            if isinstance(event, StageEvent):
                detail = f": {event.detail}" if event.detail else ""
                self.log_view.appendPlainText(f"{stamp} ▸ {event.stage}{detail}")
            elif isinstance(event, LogEvent):
                self.log_view.appendPlainText(f"{stamp}   {event.message}")
            elif isinstance(event, ResultEvent):
                self.log_view.appendPlainText(f"{stamp} ✔ {event.summary}")

    def _on_finished(self, job_id: int, _state: str, message: str) -> None:
        if self._row is None or job_id != self._row.job_id:
            return
        if message:
            self.log_view.appendPlainText(f"{time.strftime('%H:%M:%S')} ✖ {message}")

    def _refresh(self) -> None:
        row = self._row
        if row is None:
            self.stage_label.setText("No job selected.")
            self.bar.setValue(0)
            self.figures_label.setText("")
            return
        state = "paused" if row.paused and row.state is JobState.RUNNING else row.state.value
        stage = f" — {row.stage}" if row.stage and row.state is JobState.RUNNING else ""
        headline = f"<b>{row.record.spec.title}</b><br>{state}{stage}"
        if row.error:
            headline += f"<br><span style='color:#b00020'>{_escape(row.error)}</span>"
        self.stage_label.setText(headline)
        self.bar.setValue(row.percent)
        figures = [row.amount_text(), row.speed_text()]
        if row.eta_text():
            figures.append(f"{row.eta_text()} left")
        self.figures_label.setText("  ·  ".join(part for part in figures if part))


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
