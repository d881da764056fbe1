"""The catalog browser: search and filters above a grouped tree, the selected entry's detail
beside it, and the open / merge / new / edit / save operations on catalog files.

The bundled catalog is shown but read-only (it belongs to the installation); entries are edited
in the user's own catalog files, which are saved atomically by the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QItemSelection, QModelIndex, Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from app.engine.catalog import Catalog, CatalogEntry, default_catalog_path, parse_entry
from app.engine.errors import MtpStudioError
from app.engine.settings import BUNDLED_CATALOG
from app.ui.catalog.detail import EntryDetail
from app.ui.catalog.editor import EntryEditor
from app.ui.catalog.model import COLUMN_WIDTHS, PROBLEMS_COL, CatalogTreeModel, EntryNode
from app.ui.catalog.proxy import ANY, WITH_SIDECAR, WITHOUT_SIDECAR, CatalogFilterProxy
from app.ui.catalog.status import SidecarStatusBook
from app.ui.errors import show_error
from app.ui.look.tones import tone_style
from app.ui.responsive_splitter import ResponsiveSplitter

READ_ONLY_REASON = (
    "The bundled catalog is read-only. Use File → New catalog… to start your own catalog file; "
    "its entries can be edited."
)
FILTER_CHARACTERS = 6
SIDE_BY_SIDE_FROM = 960
"""The page width from which the entry's detail sits beside the tree (below it when narrower)."""
NEW_CATALOG_TEXT = "# MTP Studio catalog (see the bundled catalog for examples)\nmodels: []\n"


class CatalogBrowser(QWidget):
    """Emits ``catalog_changed`` after open/merge/edit/save, ``files_changed(paths)`` when the
    set of open files changes (the main window stores it in the settings)."""

    catalog_changed = Signal()
    files_changed = Signal(list)

    def __init__(self, book: SidecarStatusBook, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.book = book
        self.catalog: Catalog | None = None
        self.modified = False
        self.model = CatalogTreeModel(book, self)
        self.proxy = CatalogFilterProxy(self)
        self.proxy.setSourceModel(self.model)
        filters = self._build_filters()
        self._build_views(filters)
        self.tree.selectionModel().selectionChanged.connect(self._on_selection)
        for signal in (self.proxy.rowsInserted, self.proxy.rowsRemoved, self.proxy.modelReset):
            signal.connect(self._update_empty_state)
        self.proxy.layoutChanged.connect(self._update_empty_state)
        for signal in (self.proxy.rowsInserted, self.proxy.modelReset, self.proxy.layoutChanged):
            signal.connect(self._span_groups)

    def _build_filters(self) -> QHBoxLayout:
        """The search box and the tier, quantisation and sidecar filters above the tree."""
        self.search_edit = QLineEdit()
        self.search_edit.setPlaceholderText("Search models, repos, quants…")
        self.search_edit.setClearButtonEnabled(True)
        self.search_edit.textChanged.connect(self.proxy.set_search)
        self.tier_combo = QComboBox()
        self.tier_combo.currentIndexChanged.connect(
            lambda: self.proxy.set_tier(self.tier_combo.currentData() or ANY)
        )
        self.quant_combo = QComboBox()
        self.quant_combo.currentIndexChanged.connect(
            lambda: self.proxy.set_quant(self.quant_combo.currentData() or ANY)
        )
        self.sidecar_combo = QComboBox()
        for label, value in (
            ("Any sidecar", ANY),
            ("With sidecar", WITH_SIDECAR),
            ("Without sidecar", WITHOUT_SIDECAR),
        ):
            self.sidecar_combo.addItem(label, value)
        self.sidecar_combo.currentIndexChanged.connect(
            lambda: self.proxy.set_sidecar(self.sidecar_combo.currentData() or ANY)
        )
        filters = QHBoxLayout()
        filters.addWidget(self.search_edit, 1)
        for combo in (self.tier_combo, self.quant_combo, self.sidecar_combo):
            combo.setSizeAdjustPolicy(
                QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
            )
            combo.setMinimumContentsLength(FILTER_CHARACTERS)  # leaves the search box room
            filters.addWidget(combo)
        return filters

    def _build_views(self, filters: QHBoxLayout) -> None:
        """The tree of entries (with the file problems above it) beside the entry's detail."""
        self.file_banner = QLabel()
        self.file_banner.setWordWrap(True)
        self.file_banner.setStyleSheet(tone_style("error"))
        self.file_banner.setVisible(False)
        self.empty_label = QLabel("No entry matches the search and filters.")
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label.setVisible(False)

        self.tree = QTreeView()
        self.tree.setModel(self.proxy)
        self.tree.setSortingEnabled(True)
        self.tree.sortByColumn(-1, Qt.SortOrder.AscendingOrder)
        self.tree.setAlternatingRowColors(True)
        self.tree.setUniformRowHeights(True)
        self.tree.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        header = self.tree.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(PROBLEMS_COL, QHeaderView.ResizeMode.Stretch)
        for column, width in COLUMN_WIDTHS.items():
            header.resizeSection(column, width)
        header.setMinimumSectionSize(60)
        self.detail = EntryDetail(self.book)
        self.detail.edit_requested.connect(self.edit_entry)

        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addLayout(filters)
        left_layout.addWidget(self.file_banner)
        left_layout.addWidget(self.tree, 1)
        left_layout.addWidget(self.empty_label)
        self.splitter = ResponsiveSplitter(SIDE_BY_SIDE_FROM)
        self.splitter.addWidget(left)
        self.splitter.addWidget(self.detail)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 2)
        self.splitter.setSizes([900, 440])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(self.splitter)

    # -- files --------------------------------------------------------------------------------

    @property
    def paths(self) -> list[Path]:
        return list(self.catalog.paths) if self.catalog else []

    def user_files(self) -> list[Path]:
        bundled = default_catalog_path()
        return [path for path in self.paths if path != bundled]

    def open_files(self, paths: list[Path]) -> bool:
        """Show the catalog made of ``paths`` (the bundled one when empty); False on error."""
        try:
            catalog = Catalog.open(paths or None)
        except MtpStudioError as exc:
            show_error(self, "Cannot open the catalog", exc)
            return False
        self.catalog = catalog
        self.modified = False
        self._reload()
        bundled = default_catalog_path()
        saved = [BUNDLED_CATALOG if path == bundled else str(path) for path in self.paths]
        self.files_changed.emit([] if saved == [BUNDLED_CATALOG] else saved)  # [] is the default
        return True

    def open_saved(self, saved: tuple[str, ...]) -> bool:
        """Open the files listed in the settings (:data:`BUNDLED_CATALOG` for the bundled one)."""
        bundled = default_catalog_path()
        return self.open_files(
            [bundled if item == BUNDLED_CATALOG else Path(item) for item in saved]
        )

    def merge_file(self, path: Path) -> bool:
        current = self.paths or [default_catalog_path()]
        if path in current:
            return True
        return self.open_files([*current, path])

    def create_file(self, path: Path) -> bool:
        """Write an empty catalog file at ``path`` (temp name, then rename) and merge it."""
        temporary = path.with_name(f".{path.name}.tmp")
        try:
            temporary.write_text(NEW_CATALOG_TEXT, encoding="utf-8")
            temporary.replace(path)
        except OSError as exc:
            show_error(
                self,
                "Cannot create the catalog file",
                MtpStudioError(f"cannot write {path} ({exc.strerror}); choose another folder"),
            )
            return False
        return self.merge_file(path)

    def save(self) -> bool:
        if self.catalog is None:
            return True
        try:
            self.catalog.save()
        except MtpStudioError as exc:
            show_error(self, "Cannot save the catalog", exc)
            return False
        self.modified = False
        self.catalog_changed.emit()
        return True

    # -- entries ------------------------------------------------------------------------------

    def selected_node(self) -> EntryNode | None:
        index = self.tree.currentIndex()
        node = self.model.node(self.proxy.mapToSource(index)) if index.isValid() else None
        return node if isinstance(node, EntryNode) else None

    def entry(self, key: str) -> CatalogEntry:
        """The parsed entry with ``key`` (raises CatalogError naming its problems)."""
        for node in self.model.entries():
            if node.text("key") == key:
                return parse_entry(node.row.fields, node.row.location.file, node.row.location)
        raise MtpStudioError(f"no catalog entry with key {key!r}")

    def valid_entries(self) -> list[CatalogEntry]:
        """Every entry without errors (an entry with problems cannot be published)."""
        valid = []
        for node in self.model.entries():
            if not node.errors:
                valid.append(parse_entry(node.row.fields, node.row.location.file))
        return valid

    def select_key(self, key: str) -> None:
        source = self.model.index_of_key(key)
        if source.isValid():
            index = self.proxy.mapFromSource(source)
            self.tree.setCurrentIndex(index)
            self.tree.scrollTo(index)

    def edit_entry(self, key: str) -> EntryEditor | None:
        """Open the editor on entry ``key``; OK puts the change in the catalog (not yet saved)."""
        node = next((n for n in self.model.entries() if n.text("key") == key), None)
        if node is None or self.catalog is None:
            return None
        catalog = self.catalog
        editor = EntryEditor(catalog, node.row.fields, key, self)
        editor.accepted.connect(
            lambda: self._after_edit(catalog.replace_entry, key, editor.entry())
        )
        editor.open()
        return editor

    def new_entry(self) -> EntryEditor | None:
        """Open the editor on a new entry for the last of the user's catalog files."""
        files = self.user_files()
        if self.catalog is None or not files:
            show_error(self, "No catalog file of yours is open", MtpStudioError(READ_ONLY_REASON))
            return None
        catalog = self.catalog
        editor = EntryEditor(catalog, {"slices": ["full"]}, None, self)
        editor.accepted.connect(
            lambda: self._after_edit(
                lambda _key, entry: catalog.add_entry(entry, files[-1]), "", editor.entry()
            )
        )
        editor.open()
        return editor

    def _after_edit(
        self, apply: Callable[[str, CatalogEntry], None], key: str, entry: CatalogEntry
    ) -> None:
        try:
            apply(key, entry)
        except MtpStudioError as exc:
            show_error(self, "Cannot change the catalog", exc)
            return
        self.modified = True
        self._reload()
        self.select_key(entry.key)

    # -- view ---------------------------------------------------------------------------------

    def _reload(self) -> None:
        assert self.catalog is not None
        selected = self.detail.key
        self.model.load(self.catalog)
        self._fill_filter(self.tier_combo, "All tiers", "tier")
        self._fill_filter(self.quant_combo, "All quants", "quant")
        self.tree.expandAll()
        problems = self.model.file_problems
        self.file_banner.setText("\n".join(str(problem) for problem in problems))
        self.file_banner.setVisible(bool(problems))
        self.book.refresh(self.model.sidecar_repos())
        if selected:
            self.select_key(selected)
        self.refresh_detail()
        self.catalog_changed.emit()

    def _fill_filter(self, combo: QComboBox, all_label: str, field: str) -> None:
        current = combo.currentData()
        values = sorted({n.text(field) for n in self.model.entries() if n.text(field)})
        combo.blockSignals(True)
        combo.clear()
        combo.addItem(all_label, ANY)
        for value in values:
            combo.addItem(value, value)
        found = combo.findData(current)
        combo.setCurrentIndex(max(found, 0))
        combo.blockSignals(False)
        getattr(self.proxy, f"set_{field}")(combo.currentData() or ANY)

    def _on_selection(
        self, _selected: QItemSelection | None = None, _deselected: QItemSelection | None = None
    ) -> None:
        self.refresh_detail()

    def refresh_detail(self) -> None:
        """Show the selected entry again (the Hub or the chat's availability changed)."""
        node = self.selected_node()
        reason = ""
        if node is not None and node.row.location.file == default_catalog_path():
            reason = READ_ONLY_REASON
        self.detail.show_entry(node, self.book.endpoint, reason)

    def _span_groups(self, *_args: object) -> None:
        """A base model's row uses the whole width, so its name is never cut."""
        for row in range(self.proxy.rowCount(QModelIndex())):
            self.tree.setFirstColumnSpanned(row, QModelIndex(), True)

    def _update_empty_state(self, *_args: object) -> None:
        self.empty_label.setVisible(self.proxy.rowCount(QModelIndex()) == 0)
