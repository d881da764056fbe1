"""A Qt tree model over the engine's catalog: base-model groups, one row per entry.

Rows hold the entry's raw fields (not parsed entries), so an entry with problems still shows,
with its problems inline: an icon and colour on the row, the messages in the tooltip.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import (
    QAbstractItemModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    Qt,
)
from PySide6.QtGui import QBrush
from PySide6.QtWidgets import QApplication, QStyle

from app.engine.catalog import Catalog, Problem
from app.engine.catalog.crosscheck import LocatedFields
from app.ui.catalog.status import Published, SidecarStatusBook
from app.ui.look.tones import tone_qcolor

ModelIndex = QModelIndex | QPersistentModelIndex

COLUMNS = ("Model", "Quant", "Tier", "Sidecar", "Sidecar repo", "Source", "Problems")
(MODEL_COL, QUANT_COL, TIER_COL, SIDECAR_COL, SIDECAR_REPO_COL, SOURCE_COL, PROBLEMS_COL) = range(
    len(COLUMNS)
)
COLUMN_WIDTHS = {
    MODEL_COL: 270,
    QUANT_COL: 70,
    TIER_COL: 70,
    SIDECAR_COL: 150,
    SIDECAR_REPO_COL: 230,
}
KEY_ROLE = Qt.ItemDataRole.UserRole + 1
IS_GROUP_ROLE = Qt.ItemDataRole.UserRole + 2
SEARCH_ROLE = Qt.ItemDataRole.UserRole + 3
TIER_ROLE = Qt.ItemDataRole.UserRole + 4
QUANT_ROLE = Qt.ItemDataRole.UserRole + 5
HAS_SIDECAR_ROLE = Qt.ItemDataRole.UserRole + 6
SIDECAR_STATE_ROLE = Qt.ItemDataRole.UserRole + 7


@dataclass
class EntryNode:
    row: LocatedFields
    problems: list[Problem]
    group: GroupNode

    def text(self, name: str) -> str:
        value = self.row.fields.get(name)
        if isinstance(value, list | tuple):
            return ", ".join(str(item) for item in value)
        return "" if value is None else str(value)

    @property
    def key(self) -> str:
        return self.text("key") or f"(entry #{(self.row.location.index or 0) + 1})"

    @property
    def sidecar_repo(self) -> str:
        return self.text("mtp_sidecar_repo") if self.has_sidecar else ""

    @property
    def has_sidecar(self) -> bool:
        fields = self.row.fields
        return bool(fields.get("mtp_source_repo")) and bool(fields.get("mtp_sidecar_repo"))

    @property
    def errors(self) -> list[Problem]:
        return [problem for problem in self.problems if problem.is_error]


@dataclass
class GroupNode:
    base_model: str
    entries: list[EntryNode] = field(default_factory=list)


def base_model_of(fields: Mapping[str, Any]) -> str:
    for name in ("mtp_source_repo", "source_model"):
        value = fields.get(name)
        if isinstance(value, str) and value.strip():
            return value
    return "(no source model)"


def sidecar_text(node: EntryNode, book: SidecarStatusBook) -> tuple[str, str]:
    """``(label, tooltip)`` of an entry's sidecar status: configured / published / missing."""
    if not node.has_sidecar:
        return "missing", "No sidecar configured: add mtp_source_repo and mtp_sidecar_repo."
    check = book.status(node.sidecar_repo)
    where = book.endpoint
    if check.published is Published.YES:
        return "published", f"{node.sidecar_repo} has mtp.safetensors on {where}."
    if check.published is Published.CHECKING:
        return "configured (checking…)", f"Asking {where} whether it is published…"
    if check.published is Published.UNREACHABLE:
        return "configured", f"Could not ask {where} whether it is published ({check.reason})."
    if check.published is Published.NO:
        return "configured", f"Configured, not published on {where} yet: publish the sidecar."
    return "configured", "Configured in the catalog; not checked on the Hub yet."


class CatalogTreeModel(QAbstractItemModel):
    """Two levels: groups (base models, in first-seen order) and their entries."""

    def __init__(self, book: SidecarStatusBook, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._book = book
        self._groups: list[GroupNode] = []
        self.file_problems: list[Problem] = []
        book.changed.connect(self._sidecar_changed)

    def load(self, catalog: Catalog) -> None:
        """Rebuild from ``catalog`` (after open, merge or edit)."""
        problems = catalog.problems()
        by_location: dict[tuple[object, int | None], list[Problem]] = {}
        for problem in problems:
            by_location.setdefault((problem.file, problem.index), []).append(problem)
        self.beginResetModel()
        groups: dict[str, GroupNode] = {}
        for row in catalog.rows():
            name = base_model_of(row.fields)
            group = groups.setdefault(name, GroupNode(name))
            located = by_location.get((row.location.file, row.location.index), [])
            group.entries.append(EntryNode(row, located, group))
        self._groups = list(groups.values())
        self.file_problems = [p for p in problems if p.index is None]
        self.endResetModel()

    def entries(self) -> list[EntryNode]:
        return [entry for group in self._groups for entry in group.entries]

    def sidecar_repos(self) -> list[str]:
        return [entry.sidecar_repo for entry in self.entries() if entry.sidecar_repo]

    def node(self, index: ModelIndex) -> EntryNode | GroupNode | None:
        if not index.isValid():
            return None
        return index.internalPointer()

    def index_of_key(self, key: str) -> QModelIndex:
        for group_row, group in enumerate(self._groups):
            for entry_row, entry in enumerate(group.entries):
                if entry.text("key") == key:
                    return self.index(entry_row, 0, self.index(group_row, 0))
        return QModelIndex()

    # -- Qt model -----------------------------------------------------------------------------

    def index(self, row: int, column: int, parent: ModelIndex = QModelIndex()) -> QModelIndex:  # noqa: B008
        if not self.hasIndex(row, column, parent):
            return QModelIndex()
        if not parent.isValid():
            return self.createIndex(row, column, self._groups[row])
        group = parent.internalPointer()
        return self.createIndex(row, column, group.entries[row])

    def parent(self, index: ModelIndex = QModelIndex()) -> QModelIndex:  # type: ignore[override]  # noqa: B008
        node = self.node(index)
        if not isinstance(node, EntryNode):
            return QModelIndex()
        return self.createIndex(self._groups.index(node.group), 0, node.group)

    def rowCount(self, parent: ModelIndex = QModelIndex()) -> int:  # noqa: B008
        if not parent.isValid():
            return len(self._groups)
        node = parent.internalPointer()
        return len(node.entries) if isinstance(node, GroupNode) and parent.column() == 0 else 0

    def columnCount(self, parent: ModelIndex = QModelIndex()) -> int:  # noqa: B008
        return len(COLUMNS)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def data(self, index: ModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        node = self.node(index)
        if isinstance(node, GroupNode):
            return self._group_data(node, index.column(), role)
        if isinstance(node, EntryNode):
            return self._entry_data(node, index.column(), role)
        return None

    def _group_data(self, group: GroupNode, column: int, role: int) -> Any:
        if role == IS_GROUP_ROLE:
            return True
        if role == Qt.ItemDataRole.DisplayRole and column == MODEL_COL:
            count = len(group.entries)
            return f"{group.base_model}  ({count} {'entry' if count == 1 else 'entries'})"
        if role == Qt.ItemDataRole.FontRole and column == MODEL_COL:
            font = QApplication.font()
            font.setBold(True)
            return font
        return None

    def _entry_data(self, node: EntryNode, column: int, role: int) -> Any:
        if role == IS_GROUP_ROLE:
            return False
        if role == KEY_ROLE:
            return node.text("key")
        if role == SEARCH_ROLE:
            return " ".join(str(value) for value in node.row.fields.values()).lower()
        if role == TIER_ROLE:
            return node.text("tier")
        if role == QUANT_ROLE:
            return node.text("quant")
        if role == HAS_SIDECAR_ROLE:
            return node.has_sidecar
        if role == SIDECAR_STATE_ROLE:
            return sidecar_text(node, self._book)[0]
        if role == Qt.ItemDataRole.DisplayRole:
            return self._entry_text(node, column)
        if role == Qt.ItemDataRole.ToolTipRole:
            if column == SIDECAR_COL:
                return sidecar_text(node, self._book)[1]
            if node.problems:
                return "\n".join(f"• {p.message}" for p in node.problems)
            return None
        if role == Qt.ItemDataRole.ForegroundRole:
            if column in (MODEL_COL, PROBLEMS_COL) and node.problems:
                return QBrush(tone_qcolor("error" if node.errors else "warning"))
            if column == SIDECAR_COL and sidecar_text(node, self._book)[0] == "published":
                return QBrush(tone_qcolor("success"))
            return None
        if role == Qt.ItemDataRole.DecorationRole and column == MODEL_COL and node.problems:
            icon = (
                QStyle.StandardPixmap.SP_MessageBoxCritical
                if node.errors
                else QStyle.StandardPixmap.SP_MessageBoxWarning
            )
            return QApplication.style().standardIcon(icon)
        return None

    def _entry_text(self, node: EntryNode, column: int) -> str:
        if column == MODEL_COL:
            return node.key
        if column == SOURCE_COL:
            return node.text("source_model")
        if column == QUANT_COL:
            return node.text("quant")
        if column == TIER_COL:
            return node.text("tier")
        if column == SIDECAR_REPO_COL:
            return node.sidecar_repo or "—"
        if column == SIDECAR_COL:
            return sidecar_text(node, self._book)[0]
        if not node.problems:
            return ""
        first = node.problems[0]
        more = f" (+{len(node.problems) - 1} more)" if len(node.problems) > 1 else ""
        return f"{first.field or 'entry'}: {first.message}{more}"

    def _sidecar_changed(self, repo_id: str) -> None:
        for group_row, group in enumerate(self._groups):
            parent = self.index(group_row, 0)
            for entry_row, entry in enumerate(group.entries):
                if entry.sidecar_repo == repo_id:
                    changed = self.index(entry_row, SIDECAR_COL, parent)
                    self.dataChanged.emit(changed, changed)
