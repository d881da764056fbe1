"""The job monitor's table: history from the store, kept live by the runner's signals.

Speed and time left are computed here from successive progress events (the engine reports only
bytes), so every kind of job — publish, download, extraction, benchmark — gets them for free.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import (
    QModelIndex,
    QObject,
    Qt,
    QTimer,
)

from app.engine.jobs import JobEvent, ProgressEvent, ResultEvent, StageEvent
from app.engine.store import JobRecord, JobState
from app.engine.transfer_rate import TransferRate, format_duration
from app.engine.units import format_bytes, format_rate
from app.ui.column_table import ColumnTableModel, ModelIndex
from app.ui.jobs.runner import JobRunner
from app.ui.wording import in_window_words

COLUMNS = ("Job", "State", "Stage", "Progress", "Speed", "Time left", "Started")
PROGRESS_COLUMN = COLUMNS.index("Progress")
STALLED_AFTER_SECONDS = 3.0
PROGRESS_ROLE = Qt.ItemDataRole.UserRole + 1
JOB_ID_ROLE = Qt.ItemDataRole.UserRole + 2


@dataclass
class JobRow:
    """What the monitor knows about one job right now."""

    record: JobRecord
    state: JobState
    stage: str
    done: int
    total: int
    unit: str
    error: str
    result: dict[str, Any] | None
    paused: bool = False
    speed: float = 0.0
    seconds_left: float | None = None
    rate: TransferRate = field(default_factory=TransferRate)
    last_progress_at: float = 0.0

    @classmethod
    def from_record(cls, record: JobRecord) -> JobRow:
        return cls(
            record=record,
            state=record.state,
            stage=record.stage,
            done=record.done,
            total=record.total,
            unit=record.unit,
            error=record.error,
            result=record.result,
        )

    @property
    def job_id(self) -> int:
        return self.record.job_id

    @property
    def percent(self) -> int:
        if self.state is JobState.SUCCEEDED:
            return 100
        return int(100 * self.done / self.total) if self.total else 0

    def apply(self, event: JobEvent) -> None:
        if isinstance(event, ProgressEvent):
            self.stage, self.done, self.total, self.unit = (
                event.stage,
                event.done,
                event.total,
                event.unit,
            )
            self.last_progress_at = time.monotonic()
            if event.unit == "B":
                reading = self.rate.update(event.done, event.total)
                self.speed, self.seconds_left = reading.bytes_per_second, reading.seconds_left
        elif isinstance(event, StageEvent):
            self.stage = event.stage
            self.paused = event.stage == "paused"
        elif isinstance(event, ResultEvent):
            self.result = event.summary

    def amount_text(self) -> str:
        """``1.3 GB / 10.6 GB`` (or ``3 / 8 files`` for other units)."""
        if not self.total:
            return ""
        if self.unit == "B":
            return f"{format_bytes(self.done)} / {format_bytes(self.total)}"
        return f"{self.done} / {self.total} {self.unit}"

    def speed_text(self) -> str:
        active = self.state is JobState.RUNNING and not self.paused
        return format_rate(self.speed) if active and self.unit == "B" and self.speed else ""

    def eta_text(self) -> str:
        active = self.state is JobState.RUNNING and not self.paused
        return format_duration(self.seconds_left) if active and self.seconds_left else ""


def state_text(row: JobRow) -> str:
    if row.state is JobState.RUNNING and row.paused:
        return "paused"
    return row.state.value


class JobTableModel(ColumnTableModel):
    """Newest job first; rows for running jobs change as their events arrive."""

    columns = COLUMNS

    def __init__(self, runner: JobRunner, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._runner = runner
        self._rows: list[JobRow] = [JobRow.from_record(r) for r in runner.store.jobs()]
        runner.job_started.connect(self._on_started)
        runner.job_events.connect(self._on_events)
        runner.job_finished.connect(self._on_finished)
        self._stall_timer = QTimer(self)
        self._stall_timer.setInterval(1000)
        self._stall_timer.timeout.connect(self._forget_stale_speeds)
        self._stall_timer.start()

    # -- Qt model -----------------------------------------------------------------------------

    def rowCount(self, parent: ModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._rows)

    def data(self, index: ModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        row = self._rows[index.row()]
        column = index.column()
        if role == JOB_ID_ROLE:
            return row.job_id
        if role == PROGRESS_ROLE:
            return row.percent
        if role == Qt.ItemDataRole.ToolTipRole:
            return in_window_words(row.error) if row.error else row.record.spec.title
        if role != Qt.ItemDataRole.DisplayRole:
            return None
        started = row.record.started_at or row.record.created_at
        values = (
            row.record.spec.title,
            state_text(row),
            row.stage if row.state is JobState.RUNNING else "",
            row.amount_text(),
            row.speed_text(),
            row.eta_text(),
            time.strftime("%Y-%m-%d %H:%M", time.localtime(started)),
        )
        return values[column]

    # -- access ---------------------------------------------------------------------------------

    def row_of(self, job_id: int) -> int | None:
        for number, row in enumerate(self._rows):
            if row.job_id == job_id:
                return number
        return None

    def job(self, job_id: int) -> JobRow | None:
        number = self.row_of(job_id)
        return None if number is None else self._rows[number]

    def job_at(self, row: int) -> JobRow:
        return self._rows[row]

    # -- live updates -------------------------------------------------------------------------

    def _on_started(self, job_id: int) -> None:
        self.beginInsertRows(QModelIndex(), 0, 0)
        row = JobRow.from_record(self._runner.store.get(job_id))
        row.state = JobState.RUNNING
        self._rows.insert(0, row)
        self.endInsertRows()

    def _on_events(self, job_id: int, events: list[JobEvent]) -> None:
        number = self.row_of(job_id)
        if number is None:
            return
        row = self._rows[number]
        for event in events:
            row.apply(event)
        self._changed(number)

    def _on_finished(self, job_id: int, state: str, message: str) -> None:
        number = self.row_of(job_id)
        if number is None:
            return
        row = self._rows[number]
        row.state, row.error, row.paused = JobState(state), message, False
        self._changed(number)

    def _forget_stale_speeds(self) -> None:
        """No bytes for a while (a retry wait, a stalled link): show no speed rather than a
        stale one, and no time left."""
        now = time.monotonic()
        for number, row in enumerate(self._rows):
            stale = now - row.last_progress_at > STALLED_AFTER_SECONDS
            if row.state is JobState.RUNNING and stale and row.speed:
                row.speed, row.seconds_left = 0.0, None
                row.rate = TransferRate()
                self._changed(number)

    def _changed(self, number: int) -> None:
        self.dataChanged.emit(self.index(number, 0), self.index(number, len(COLUMNS) - 1))
