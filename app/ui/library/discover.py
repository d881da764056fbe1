"""Discover on the Hub: search for a model's conversions and get one ready to draft with MTP.

A search box (with a format choice) and a results table with one row per quantisation — repo,
format (with "+ vision" where the repo ships a projector), quantisation, size (all parts of a
split file), whether it fits this machine, how it gets its MTP head (for Gemma 4 a separate
drafter model: the tooltip says where it comes from) — and a Get button. The search
runs in a background thread and always asks the Hub saved in Settings now. Get does not run
anything itself: it emits ``get_requested(GetJob)`` for the window, which runs it as a job and
hands it back to :meth:`DiscoverPanel.follow`: the status line then follows the job's stage and
progress, and when it is done says what is ready and offers Chat on it (``chat_requested``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from PySide6.QtCore import QModelIndex, QObject, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.engine.chat.memory import physical_memory_bytes
from app.engine.errors import MtpStudioError
from app.engine.hub.get import GET_KIND, GetJob, plan_for
from app.engine.hub.search import (
    FORMATS,
    QuantOption,
    RepoHit,
    SearchQuery,
    SearchResult,
    search_models,
)
from app.engine.jobs import JobEvent, ProgressEvent, StageEvent
from app.engine.settings import Settings
from app.engine.store import JobState
from app.engine.units import format_bytes
from app.ui.background import run_in_background
from app.ui.column_table import ColumnTableModel, ModelIndex
from app.ui.errors import readable
from app.ui.jobs.results import chat_model
from app.ui.jobs.runner import JobRunner
from app.ui.wording import in_window_words

COLUMNS = ("Repo", "Format", "Quantisation", "Size", "Fits", "MTP")
ANY_FORMAT = "Any format"


class ResultsModel(ColumnTableModel):
    """One row per (repo, quantisation) of a search result."""

    columns = COLUMNS

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.rows: list[tuple[RepoHit, QuantOption]] = []

    def set_result(self, result: SearchResult) -> None:
        self.beginResetModel()
        self.rows = [(hit, option) for hit in result.hits for option in hit.quantisations]
        self.endResetModel()

    def rowCount(self, parent: ModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.rows)

    def cells(self, row: int) -> tuple[str, ...]:
        hit, option = self.rows[row]
        parts = f" ({len(option.files)} parts)" if len(option.files) > 1 else ""
        vision = " + vision" if hit.projectors else ""
        return (
            hit.repo_id,
            f"{hit.format}{vision}",
            option.label,
            f"{format_bytes(option.size)}{parts}",
            f"{option.fit.mark} {option.fit.verdict}",
            option.mtp,
        )

    def data(self, index: ModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return self.cells(index.row())[index.column()]
        if role == Qt.ItemDataRole.ToolTipRole:
            hit, option = self.rows[index.row()]
            context = f" at {option.fit.context:,} tokens" if option.fit.context else ""
            lines = [
                *option.files,
                f"about {format_bytes(option.fit.estimate_bytes)} loaded{context}",
            ]
            if hit.sidecar_repo:
                lines.append(f"sidecar: {hit.sidecar_repo}")
            if hit.drafter is not None:
                lines.append(hit.drafter.describe())
            lines.extend(f"vision projector: {name}" for name in hit.projectors)
            return "\n".join(lines)
        return None


class DiscoverPanel(QWidget):
    """Signals: ``get_requested(GetJob)``, ``chat_requested(Path)`` (a Get's ready model)."""

    get_requested = Signal(object)
    chat_requested = Signal(Path)

    def __init__(
        self,
        settings: Callable[[], Settings],
        grafted_dir: Path,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("discoverPanel")
        self._settings = settings
        self._grafted_dir = grafted_dir
        self._sidecars: dict[str, str] = {}
        self._drafters: dict[str, str] = {}
        self.searching = False

        self.query = QLineEdit()
        self.query.setPlaceholderText("Search the Hub by name, e.g. Qwen3.6-27B")
        self.query.setClearButtonEnabled(True)
        self.format = QComboBox()
        self.format.addItems([ANY_FORMAT, *FORMATS])
        self.search_button = QPushButton("Search")
        self.results = ResultsModel(self)
        self.table = QTableView()
        self.table.setModel(self.results)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().hide()
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.get_button = QPushButton("Get")
        self.get_button.setToolTip(
            "Download this quantisation and make it MTP-ready (a job in Jobs)"
        )
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.chat_button = QPushButton("Chat")
        self.chat_button.setProperty("primary", True)
        self.chat_button.setToolTip("Chat with the model the last Get made ready")
        self.chat_button.hide()
        self._runner: JobRunner | None = None
        self._job_id: int | None = None
        self._job_title = ""
        self._ready: Path | None = None

        top = QHBoxLayout()
        top.addWidget(self.query, 1)
        top.addWidget(self.format)
        top.addWidget(self.search_button)
        bottom = QHBoxLayout()
        bottom.addWidget(self.status, 1)
        bottom.addWidget(self.chat_button)
        bottom.addWidget(self.get_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.table, 1)
        layout.addLayout(bottom)

        self.query.returnPressed.connect(self.search)
        self.search_button.clicked.connect(self.search)
        self.get_button.clicked.connect(self.get_selected)
        self.chat_button.clicked.connect(self._chat)
        self.table.selectionModel().selectionChanged.connect(lambda *_: self._update_get())
        self.table.doubleClicked.connect(lambda _index: self.get_selected())
        self._update_get()

    def set_sidecars(self, sidecars: Mapping[str, str]) -> None:
        """Base model (or public conversion) → sidecar repo, from the catalog."""
        self._sidecars = dict(sidecars)

    def set_drafters(self, drafters: Mapping[str, str]) -> None:
        """Model repo → separate drafter repo (Gemma 4's assistant), from the catalog."""
        self._drafters = dict(drafters)

    def search(self) -> None:
        if self.searching:
            return
        chosen = self.format.currentText()
        try:
            query = SearchQuery(self.query.text().strip(), "" if chosen == ANY_FORMAT else chosen)
        except MtpStudioError as exc:
            self.status.setText(str(exc))
            return
        endpoint, sidecars = self._settings().endpoint, dict(self._sidecars)
        drafters = dict(self._drafters)
        self.searching = True
        self.search_button.setEnabled(False)
        self.status.setText(f"Searching {endpoint}…")
        run_in_background(
            lambda: search_models(
                query,
                endpoint=endpoint,
                token=None,
                sidecars=sidecars,
                memory_bytes=physical_memory_bytes(),
                drafters=drafters,
            ),
            self._show,
            self._failed,
        )

    def _show(self, result: SearchResult) -> None:
        self.searching = False
        self.search_button.setEnabled(True)
        self.results.set_result(result)
        self.status.setText(
            f"{len(result.hits)} repo(s), {self.results.rowCount()} quantisation(s) "
            f"in {result.seconds:.2f} s"
        )
        self._update_get()

    def _failed(self, exc: BaseException) -> None:
        self.searching = False
        self.search_button.setEnabled(True)
        self.status.setText(readable(exc))

    def selected(self) -> tuple[RepoHit, QuantOption] | None:
        rows = self.table.selectionModel().selectedRows()
        return self.results.rows[rows[0].row()] if rows else None

    def get_selected(self) -> GetJob | None:
        chosen = self.selected()
        if chosen is None:
            return None
        settings = self._settings()
        try:
            plan = plan_for(*chosen)
        except MtpStudioError as exc:  # e.g. a drafter of another model size
            self.status.setText(in_window_words(str(exc)))
            return None
        job = GetJob(plan, settings.endpoint, settings.models_path(), self._grafted_dir)
        self._job_title = plan.title
        self.status.setText(f"{plan.title}: starting…")
        self.get_requested.emit(job)
        return job

    # -- following a Get ----------------------------------------------------------------------

    def follow(self, job_id: int, runner: JobRunner) -> None:
        """Show job ``job_id``'s progress in the status line until it ends."""
        if self._runner is None:
            self._runner = runner
            runner.job_events.connect(self._on_events)
            runner.job_finished.connect(self._on_finished)
        self._job_id = job_id
        self._ready = None
        self.chat_button.hide()

    def _on_events(self, job_id: int, events: list[JobEvent]) -> None:
        if job_id != self._job_id:
            return
        for event in events:
            if isinstance(event, StageEvent):
                self.status.setText(f"{self._job_title}: {event.stage}…")
            elif isinstance(event, ProgressEvent) and event.total:
                percent = 100 * event.done / event.total
                self.status.setText(f"{self._job_title}: {event.stage} {percent:.0f} %")

    def _on_finished(self, job_id: int, state: str, message: str) -> None:
        if job_id != self._job_id or self._runner is None:
            return
        self._job_id = None
        if state != JobState.SUCCEEDED:
            outcome = "cancelled" if state == JobState.CANCELLED else f"failed: {message}"
            self.status.setText(f"{self._job_title}: {outcome} (details on the Jobs page)")
            return
        result = self._runner.store.get(job_id).result or {}
        self._ready = chat_model(GET_KIND, result)
        note = f" — {result['note']}" if result.get("note") else ""
        where = self._ready.name if self._ready is not None else "done"
        self.status.setText(f"{self._job_title}: ready, {where}{note}")
        self.chat_button.setVisible(self._ready is not None)

    def _chat(self) -> None:
        if self._ready is not None:
            self.chat_requested.emit(self._ready)

    def _update_get(self) -> None:
        self.get_button.setEnabled(self.selected() is not None)
