"""A flat Qt table model under a fixed tuple of column titles, for the Jobs and Models pages.

Both tables list rows under fixed titles; their column count and header text were the same
code twice. A subclass sets ``columns`` and implements ``rowCount`` and ``data``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt

ModelIndex = QModelIndex | QPersistentModelIndex


class ColumnTableModel(QAbstractTableModel):
    columns: ClassVar[tuple[str, ...]] = ()

    def columnCount(self, parent: ModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.columns)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.columns[section]
        return None
