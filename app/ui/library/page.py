"""The Models page: every model on disk, what it is, what it takes, and what can be done with it.

A table (name, format, quantisation, size on disk, MTP status, location) of what the chat's
discovery finds — the bundled demo, the Hugging Face cache, the models folder, grafted copies
and the files opened in the chat — with a filter box and, for the selected model, Chat, Add MTP
head from sidecar, Download sidecar, Reveal in file manager and Delete… (as buttons and as the
table's context menu). Deleting asks first with the bytes it really frees, then refreshes and
says what was freed.

Scanning, planning a deletion and deleting run in background threads; the GUI thread only
renders. The page does not chat, graft or download itself: it emits ``chat_requested(path)``,
``graft_requested(model, sidecar)`` and ``download_sidecar_requested(repo_id)`` for the window
that owns those jobs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QPoint, Qt, QUrl, Signal
from PySide6.QtGui import QAction, QDesktopServices
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QMessageBox,
    QPushButton,
    QStackedWidget,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.engine.chat.history import HistoryStore
from app.engine.chat.model_files import ModelDescription, describe_model
from app.engine.convert.fp8_check import is_fp8_refusal
from app.engine.library.deletion import DeletePlan, delete, plan_delete
from app.engine.library.inventory import (
    OPENED_FILE,
    SIDECAR_ON_HUB,
    Inventory,
    LibraryModel,
    LibraryRoots,
    LibrarySources,
    build_inventory,
)
from app.engine.runtime.core.demo_model import MODELS_DIR
from app.engine.settings import AppDirs, Settings, hf_hub_cache
from app.engine.units import format_bytes
from app.ui.background import run_in_background
from app.ui.errors import readable
from app.ui.icons import icon
from app.ui.library.discover import DiscoverPanel
from app.ui.library.table import MODEL_ROLE, LibraryFilter, LibraryTableModel
from app.ui.wording import in_window_words

EMPTY_TEXT = "No models yet — download one from the Catalog or chat with the bundled demo."


class LibraryPage(QWidget):
    """Signals: ``chat_requested(Path)``, ``graft_requested(Path, Path)`` (model, sidecar),
    ``download_sidecar_requested(str)`` (the sidecar's repo id) and ``get_requested(GetJob)``
    (from the Discover panel)."""

    chat_requested = Signal(Path)
    graft_requested = Signal(Path, Path)
    download_sidecar_requested = Signal(str)
    get_requested = Signal(object)
    models_changed = Signal(list)
    """Every model the last scan found (``LibraryModel``), for the Server page's picker."""

    def __init__(
        self,
        dirs: AppDirs,
        settings: Callable[[], Settings],
        history: HistoryStore,
        parent: QWidget | None = None,
        *,
        demo_dir: Path = MODELS_DIR,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("libraryPage")
        self._dirs = dirs
        self._settings = settings
        self._history = history
        self._demo_dir = demo_dir
        self._catalog_sidecars: dict[str, str] = {}
        self._scan_number = 0
        self._select_after_scan: Path | None = None
        self.model_in_use: Callable[[], Path | None] = lambda: None
        """The model the chat has loaded (the main window sets it): never deleted under it."""
        self._deleting: DeletePlan | None = None
        self._sized = False
        self.scanning = False
        self.confirmation: QMessageBox | None = None
        self.menu: QMenu | None = None
        self._build_top()
        self.discover = DiscoverPanel(settings, dirs.grafted_models)
        self.discover.hide()
        self._build_table()
        buttons = self._build_actions()
        self._add_icons()
        top = QHBoxLayout()
        top.addWidget(self.search, 1)
        top.addWidget(self.refresh_button)
        top.addWidget(self.discover_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(20, 16, 20, 8)
        layout.setSpacing(10)
        layout.addWidget(self.title)
        layout.addWidget(self.subtitle)
        layout.addLayout(top)
        layout.addWidget(self.discover, 1)
        layout.addWidget(self.stack, 1)
        layout.addLayout(buttons)
        layout.addWidget(self.status)
        self._connect()
        self._update_actions()
        self.refresh()

    def _build_top(self) -> None:
        self.title = QLabel("Models")
        self.title.setObjectName("pageTitle")
        self.subtitle = QLabel()
        self.subtitle.setObjectName("pageSubtitle")
        self.subtitle.setWordWrap(True)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Filter by name, format, quantisation, MTP or location")
        self.search.setClearButtonEnabled(True)
        self.refresh_button = QPushButton("Refresh")
        self.discover_button = QPushButton("Discover on the Hub…")
        self.discover_button.setCheckable(True)
        self.discover_button.setToolTip(
            "Search the Hub for a model's GGUF / MLX conversions and get one ready for MTP"
        )

    def _build_table(self) -> None:
        self.table_model = LibraryTableModel(self)
        self.proxy = LibraryFilter(self.table_model, self)
        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(-1, Qt.SortOrder.AscendingOrder)  # discovery's order until asked
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        self.table.verticalHeader().hide()
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        self.empty_state = QLabel(EMPTY_TEXT)
        self.empty_state.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_state.setWordWrap(True)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.table)
        self.stack.addWidget(self.empty_state)
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

    def _build_actions(self) -> QHBoxLayout:
        """The selected model's actions, as buttons under the table (and its context menu)."""
        self.chat_action = QAction("Chat", self)
        self.graft_action = QAction("Add MTP head from sidecar…", self)
        self.download_action = QAction("Download sidecar", self)
        self.reveal_action = QAction("Reveal in file manager", self)
        self.delete_action = QAction("Delete…", self)
        self.actions_in_order = (
            self.chat_action,
            self.graft_action,
            self.download_action,
            self.reveal_action,
            self.delete_action,
        )
        self.buttons: dict[QAction, QPushButton] = {}
        buttons = QHBoxLayout()
        short = {self.graft_action: "Add MTP head…", self.reveal_action: "Reveal"}
        for action in self.actions_in_order:
            button = QPushButton(short.get(action, action.text()))  # the menu says it in full
            button.setToolTip(action.text())
            button.clicked.connect(action.trigger)
            self.buttons[action] = button
            buttons.addWidget(button)
        buttons.addStretch(1)
        return buttons

    def _add_icons(self) -> None:
        for action, name in (
            (self.chat_action, "chat"),
            (self.graft_action, "graft"),
            (self.download_action, "download"),
            (self.reveal_action, "folder"),
            (self.delete_action, "trash"),
        ):
            action.setIcon(icon(name))
            self.buttons[action].setIcon(icon(name))
        for action in (self.reveal_action, self.delete_action):  # icon-only: the tooltip
            button = self.buttons[action]  # and the context menu say what they do
            button.setText("")
            button.setAccessibleName(action.text())
        self.refresh_button.setIcon(icon("refresh"))

    def _connect(self) -> None:
        self.search.textChanged.connect(self.proxy.setFilterFixedString)
        self.refresh_button.clicked.connect(self.refresh)
        self.discover_button.toggled.connect(self.discover.setVisible)
        self.discover.get_requested.connect(self.get_requested)
        self.discover.chat_requested.connect(self.chat_requested)
        self.table.selectionModel().selectionChanged.connect(lambda *_: self._update_actions())
        self.proxy.modelReset.connect(self._update_actions)
        self.proxy.layoutChanged.connect(self._update_actions)
        self.table.doubleClicked.connect(lambda _index: self.chat_action.trigger())
        self.table.customContextMenuRequested.connect(self._show_menu)
        self.chat_action.triggered.connect(self._chat)
        self.graft_action.triggered.connect(self._graft)
        self.download_action.triggered.connect(self._download_sidecar)
        self.reveal_action.triggered.connect(self._reveal)
        self.delete_action.triggered.connect(self.ask_delete)

    # -- public API ---------------------------------------------------------------------------

    def show_discover(self) -> None:
        """Open the Discover panel with the focus in its search box."""
        self.discover_button.setChecked(True)
        self.discover.query.setFocus()

    @property
    def models(self) -> list[LibraryModel]:
        return self.table_model.models

    def set_catalog_sidecars(self, sidecars: dict[str, str]) -> None:
        """The catalog's model repo → sidecar repo mapping (for "Download sidecar")."""
        self._catalog_sidecars = dict(sidecars)
        self.refresh()

    def add_opened(self, path: Path) -> None:
        """Remember a model the user opened in the chat's history (as the chat does: only when
        it can be read), then rescan; reading its header happens in the background."""
        path = Path(path)
        run_in_background(lambda: describe_model(path), self._on_opened, self._on_open_failed)

    def _on_opened(self, description: ModelDescription) -> None:
        if description.problem is not None:
            self.status.setText(f"Not added: {in_window_words(description.problem)}")
            return
        self._history.remember_model(description.path)
        self.refresh()

    def _on_open_failed(self, exc: BaseException) -> None:
        self.status.setText(f"Not added: {readable(exc)}")

    def sources(self) -> LibrarySources:
        """Where to look, with the models folder as saved in Settings now."""
        roots = LibraryRoots(
            self._settings().models_path(), hf_hub_cache(), self._dirs.grafted_models
        )
        return LibrarySources(
            roots=roots,
            opened=tuple(self._history.opened_models()),
            demo_dir=self._demo_dir,
            catalog_sidecars=dict(self._catalog_sidecars),
        )

    def refresh(self, select: Path | None = None) -> None:
        """Scan in the background; the table fills when the scan ends (a later scan wins) and
        ``select``'s row, if given, is selected then."""
        self._select_after_scan = select
        self._scan_number += 1
        number = self._scan_number
        sources = self.sources()
        self.scanning = True
        self.refresh_button.setEnabled(False)
        self.subtitle.setText("Looking for models…")
        run_in_background(
            lambda: (number, len(sources.opened), build_inventory(sources)),
            self._on_scanned,
            self._on_scan_failed,
        )

    def selected_model(self) -> LibraryModel | None:
        rows = self.table.selectionModel().selectedRows()
        return rows[0].data(MODEL_ROLE) if rows else None

    def select(self, path: Path) -> bool:
        """Select the row of the model at ``path`` (False when it is not shown)."""
        for row in range(self.proxy.rowCount()):
            index = self.proxy.index(row, 0)
            if index.data(MODEL_ROLE).path == path:
                self.table.selectRow(row)
                return True
        return False

    # -- scanning -----------------------------------------------------------------------------

    def _on_scanned(self, outcome: tuple[int, int, Inventory]) -> None:
        number, opened_count, inventory = outcome
        if number != self._scan_number:
            return
        self.scanning = False
        self.refresh_button.setEnabled(True)
        selected = self.selected_model()
        wanted = self._select_after_scan or (selected.path if selected is not None else None)
        self.table_model.set_models(list(inventory.models))
        self.models_changed.emit(list(inventory.models))
        if not self._sized and inventory.models:
            self.table.resizeColumnsToContents()
            self._sized = True
        if wanted is not None:
            self.select(wanted)
        self.stack.setCurrentWidget(self.table if inventory.models else self.empty_state)
        self.subtitle.setText(_summary(inventory, opened_count))

    def _on_scan_failed(self, exc: BaseException) -> None:
        self.scanning = False
        self.refresh_button.setEnabled(True)
        self.subtitle.setText("")
        self.status.setText(f"Looking for models failed: {readable(exc)}")

    # -- actions ------------------------------------------------------------------------------

    def _update_actions(self) -> None:
        model = self.selected_model()
        enabled = {
            self.chat_action: model is not None and chat_can_open(model.description),
            self.graft_action: model is not None and model.can_graft,
            self.download_action: model is not None and model.mtp.kind == SIDECAR_ON_HUB,
            self.reveal_action: model is not None,
            self.delete_action: model is not None and model.deletable and self._deleting is None,
        }
        for action, on in enabled.items():
            action.setEnabled(on)
            self.buttons[action].setEnabled(on)
        if model is not None and model.mtp.kind == SIDECAR_ON_HUB:
            self.download_action.setToolTip(f"Download {model.mtp.sidecar_repo}")
        reason = model.description.problem or model.description.runnable_reason if model else None
        reason = in_window_words(reason) if reason else None
        self.chat_action.setToolTip(reason or "")
        self.buttons[self.chat_action].setToolTip(reason or "")

    def _show_menu(self, position: QPoint) -> None:
        index = self.table.indexAt(position)
        if not index.isValid():
            return
        self.table.selectRow(index.row())
        if self.menu is not None:
            self.menu.deleteLater()
        self.menu = QMenu(self)
        for action in self.actions_in_order:
            self.menu.addAction(action)
        self.menu.popup(self.table.viewport().mapToGlobal(position))

    def _chat(self) -> None:
        model = self.selected_model()
        if model is not None and chat_can_open(model.description):
            self.chat_requested.emit(model.path)

    def _graft(self) -> None:
        model = self.selected_model()
        if model is not None and model.can_graft and model.mtp.sidecar is not None:
            self.graft_requested.emit(model.path, model.mtp.sidecar)

    def _download_sidecar(self) -> None:
        model = self.selected_model()
        if model is not None and model.mtp.sidecar_repo:
            self.download_sidecar_requested.emit(model.mtp.sidecar_repo)

    def _reveal(self) -> None:
        model = self.selected_model()
        if model is not None:
            folder = model.path if model.path.is_dir() else model.path.parent
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder)))

    # -- deleting -----------------------------------------------------------------------------

    def ask_delete(self) -> None:
        """Work out what deleting the selected model frees (in the background), then ask."""
        model = self.selected_model()
        if model is None or not model.deletable or self._deleting is not None:
            return
        if model.path == self.model_in_use():
            self.status.setText(
                f"{model.name} is loaded in the chat: choose another model there, then delete it."
            )
            return
        self.status.setText(f"Working out what deleting {model.name} frees…")
        run_in_background(lambda: plan_delete(model), self._confirm_delete, self._on_delete_failed)

    def _confirm_delete(self, plan: DeletePlan) -> None:
        self.status.setText("")
        shown = "\n".join(str(path) for path in plan.paths[:5])
        more = f"\n… and {len(plan.paths) - 5} more" if len(plan.paths) > 5 else ""
        box = QMessageBox(
            QMessageBox.Icon.Warning,
            "Delete model",
            f"Delete {plan.model.name}? This frees {format_bytes(plan.freed_bytes)}.",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
            self,
        )
        box.setInformativeText(f"Removes:\n{shown}{more}\n\nThis cannot be undone.")
        box.button(QMessageBox.StandardButton.Yes).setText("Delete")
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.accepted.connect(lambda: self._start_delete(plan))
        box.finished.connect(lambda _result: setattr(self, "confirmation", None))
        self.confirmation = box
        box.open()

    def _start_delete(self, plan: DeletePlan) -> None:
        self._deleting = plan
        self._update_actions()
        self.status.setText(f"Deleting {plan.model.name}…")
        run_in_background(lambda: delete(plan), self._on_deleted, self._on_delete_failed)

    def _on_deleted(self, freed: int) -> None:
        plan, self._deleting = self._deleting, None
        if plan is not None:
            if plan.model.location.kind == OPENED_FILE:
                self._history.forget_model(plan.model.path)
            self.status.setText(f"Deleted {plan.model.name}: {format_bytes(freed)} freed.")
        self.refresh()

    def _on_delete_failed(self, exc: BaseException) -> None:
        deleting, self._deleting = self._deleting, None
        self.status.setText(f"Not deleted: {readable(exc)}")
        if deleting is not None:
            self.refresh()  # a partial deletion changes what is on disk
        else:
            self._update_actions()


def _summary(inventory: Inventory, opened_count: int) -> str:
    count = len(inventory.models)
    noun = "model" if count == 1 else "models"
    places = ", ".join(str(root) for root in inventory.roots)
    opened = f" and {opened_count} opened file(s)" if opened_count else ""
    return (
        f"{count} {noun}, {format_bytes(inventory.total_bytes)} on disk. "
        f"Looked in {places}{opened}."
    )


def chat_can_open(description: ModelDescription) -> bool:
    """Runnable models, and FP8 checkpoints: the chat says why mlx-lm cannot load one and
    offers to convert it."""
    return description.runnable or (
        description.problem is None and is_fp8_refusal(description.runnable_reason)
    )
