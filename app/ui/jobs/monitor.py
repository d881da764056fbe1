"""The job monitor: every job of this user (history included), its progress, log and actions.

Actions work on the selected job: cancel, pause/resume (downloads), retry (failed, cancelled or
interrupted jobs — a download resumes from its partial files), show files, and Chat for a job that
made a model ready to run (a Get, a graft, a conversion).

The table spans the page's width above the selected job's details, so a job's name ("Download
org/name (all files)") shows whole: beside the details, six columns of at least 70 px left the
name column a few letters ("Do…s)"). The other columns fit their content; the name column takes
the rest and, when even that is too narrow, keeps its start ("Download org/na…"), which says
what the job does.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QModelIndex, QRect, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QPainter
from PySide6.QtWidgets import (
    QApplication,
    QHBoxLayout,
    QHeaderView,
    QPushButton,
    QSplitter,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionProgressBar,
    QStyleOptionViewItem,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.engine.errors import MtpStudioError
from app.engine.store import JobState
from app.engine.store.kinds import FACTORIES
from app.ui.errors import show_error
from app.ui.jobs.model import JOB_ID_ROLE, PROGRESS_COLUMN, PROGRESS_ROLE, JobRow, JobTableModel
from app.ui.jobs.progress import JobProgressView
from app.ui.jobs.results import chat_model
from app.ui.jobs.runner import JobRunner

MIN_COLUMN_WIDTH = 40
"""Empty columns (no speed for a finished job) stay narrow; their titles still fit."""


class ProgressDelegate(QStyledItemDelegate):
    """Draws the progress column as a bar with the byte counts on it."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex) -> None:
        bar = QStyleOptionProgressBar()
        bar.rect = QRect(option.rect.adjusted(2, 3, -2, -3))
        bar.minimum, bar.maximum = 0, 100
        bar.progress = int(index.data(PROGRESS_ROLE) or 0)
        bar.text = str(index.data() or "")
        bar.textVisible = True
        bar.state = option.state
        style = option.widget.style() if option.widget else QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ProgressBar, bar, painter)


def files_location(row: JobRow) -> Path | None:
    """Where a job's files are: the result's location, else the destination it was given."""
    for source in (row.result or {}, row.record.spec.params):
        for key in ("location", "destination"):
            value = source.get(key)
            if isinstance(value, str) and value:
                return Path(value)
    return None


class JobMonitor(QWidget):
    """Table of jobs above the selected job's progress, log and action buttons;
    ``chat_requested(path)`` when the user asks to chat with the model a job made."""

    chat_requested = Signal(Path)

    def __init__(self, runner: JobRunner, jobs: JobTableModel, parent: QWidget | None = None):
        super().__init__(parent)
        self.runner = runner
        self.jobs = jobs
        self.table = QTableView()
        self.table.setModel(jobs)
        self.table.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QTableView.SelectionMode.SingleSelection)
        self.table.verticalHeader().hide()
        self.table.setItemDelegateForColumn(PROGRESS_COLUMN, ProgressDelegate(self.table))
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in range(1, jobs.columnCount()):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        header.setMinimumSectionSize(MIN_COLUMN_WIDTH)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        self.table.setTextElideMode(Qt.TextElideMode.ElideRight)

        self.progress = JobProgressView(runner, jobs)
        self.cancel_button = QPushButton("Cancel")
        self.pause_button = QPushButton("Pause")
        self.retry_button = QPushButton("Retry")
        self.files_button = QPushButton("Show files")
        self.chat_button = QPushButton("Chat")
        self.chat_button.setToolTip("Chat with the model this job made ready")
        self.chat_button.setProperty("primary", True)
        self.cancel_button.clicked.connect(self._cancel)
        self.pause_button.clicked.connect(self._toggle_pause)
        self.retry_button.clicked.connect(self._retry)
        self.files_button.clicked.connect(self._show_files)
        self.chat_button.clicked.connect(self._chat)
        buttons = QHBoxLayout()
        for button in (self.cancel_button, self.pause_button, self.retry_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        buttons.addWidget(self.files_button)
        buttons.addWidget(self.chat_button)

        details = QWidget()
        details_layout = QVBoxLayout(details)
        details_layout.setContentsMargins(0, 6, 0, 0)
        details_layout.addWidget(self.progress, 1)
        details_layout.addLayout(buttons)

        self.splitter = QSplitter(Qt.Orientation.Vertical)
        self.splitter.addWidget(self.table)
        self.splitter.addWidget(details)
        self.splitter.setStretchFactor(0, 2)
        self.splitter.setStretchFactor(1, 3)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.splitter)

        self.table.selectionModel().currentRowChanged.connect(self._on_selection)
        jobs.dataChanged.connect(self._update_buttons)
        jobs.rowsInserted.connect(self._update_buttons)
        runner.pause_changed.connect(self._update_buttons)
        if jobs.rowCount():
            self.select_job(jobs.job_at(0).job_id)
        self._update_buttons()

    def select_job(self, job_id: int) -> None:
        number = self.jobs.row_of(job_id)
        if number is not None:
            self.table.selectRow(number)
            self.progress.follow(job_id)
            self._update_buttons()

    def selected_job(self) -> JobRow | None:
        index = self.table.currentIndex()
        if not index.isValid():
            return None
        return self.jobs.job(int(index.data(JOB_ID_ROLE)))

    def _on_selection(self, current: QModelIndex, _previous: QModelIndex) -> None:
        self.progress.follow(int(current.data(JOB_ID_ROLE)) if current.isValid() else None)
        self._update_buttons()

    def _update_buttons(self, *_changed: object) -> None:
        row = self.selected_job()
        running = row is not None and self.runner.is_running(row.job_id)
        self.cancel_button.setEnabled(running)
        can_pause = running and row is not None and self.runner.can_pause(row.job_id)
        self.pause_button.setEnabled(can_pause)
        paused = row is not None and self.runner.is_paused(row.job_id)
        self.pause_button.setText("Resume" if paused else "Pause")
        self.pause_button.setToolTip("" if can_pause else "Only running downloads can be paused.")
        known_kind = row is not None and row.record.spec.kind in FACTORIES
        self.retry_button.setEnabled(known_kind and row is not None and row.state.retryable)
        self.retry_button.setToolTip(
            "" if row is None or known_kind else f"{row.record.spec.kind} jobs cannot be re-run"
        )
        self.files_button.setEnabled(row is not None and files_location(row) is not None)
        self.chat_button.setVisible(self._ready_model(row) is not None)

    @staticmethod
    def _ready_model(row: JobRow | None) -> Path | None:
        if row is None or row.state is not JobState.SUCCEEDED:
            return None
        return chat_model(row.record.spec.kind, row.result)

    def _chat(self) -> None:
        model = self._ready_model(self.selected_job())
        if model is not None:
            self.chat_requested.emit(model)

    def _cancel(self) -> None:
        row = self.selected_job()
        if row is not None:
            self.runner.cancel(row.job_id)

    def _toggle_pause(self) -> None:
        row = self.selected_job()
        if row is not None:
            self.runner.set_paused(row.job_id, not self.runner.is_paused(row.job_id))

    def _retry(self) -> None:
        row = self.selected_job()
        if row is None:
            return
        try:
            new_id = self.runner.retry(row.job_id)
        except MtpStudioError as exc:
            show_error(self, "Cannot retry the job", exc)
            return
        self.select_job(new_id)

    def _show_files(self) -> None:
        row = self.selected_job()
        location = files_location(row) if row else None
        if location is None:
            return
        target = location if location.is_dir() else location.parent
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(target)))
