"""The library's table: one row per model on disk, sortable and filterable.

Columns: Name, Format, Quantisation, Size, MTP, Location. Sizes sort by bytes (not by their
text), and the filter matches any column, so "q8", "mlx", "sidecar" or a repo name all narrow
the list. Tooltips carry what does not fit a cell: the path, the paired sidecar's path, why a
model cannot be read.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import (
    QModelIndex,
    QObject,
    QSortFilterProxyModel,
    Qt,
)

from app.engine.library.inventory import SIDECAR_PAIRED, LibraryModel
from app.engine.units import format_bytes
from app.ui.chat.widgets.model_text import sidecar_label
from app.ui.column_table import ColumnTableModel, ModelIndex
from app.ui.wording import in_window_words

COLUMNS = ("Name", "Format", "Quantisation", "Size", "MTP", "Location")
SIZE_COLUMN = COLUMNS.index("Size")
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
MODEL_ROLE = Qt.ItemDataRole.UserRole + 2


def mtp_text(model: LibraryModel) -> str:
    """The MTP cell: the status, with a cached sidecar named by its repo."""
    if model.mtp.kind == SIDECAR_PAIRED and model.mtp.sidecar is not None:
        return f"Sidecar paired: {sidecar_label(model.mtp.sidecar)}"
    return model.mtp.label


def vision_lines(model: LibraryModel) -> list[str]:
    """One line per vision projector listed with the model: ``Vision: mmproj-… (size)``."""
    return [f"Vision: {p.name} ({format_bytes(p.size_bytes)})" for p in model.projectors]


class LibraryTableModel(ColumnTableModel):
    columns = COLUMNS

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._models: list[LibraryModel] = []

    @property
    def models(self) -> list[LibraryModel]:
        return list(self._models)

    def set_models(self, models: list[LibraryModel]) -> None:
        self.beginResetModel()
        self._models = list(models)
        self.endResetModel()

    def rowCount(self, parent: ModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._models)

    def data(self, index: ModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        model = self._models[index.row()]
        column = index.column()
        if role == MODEL_ROLE:
            return model
        if role == Qt.ItemDataRole.DisplayRole:
            return self._cells(model)[column]
        if role == SORT_ROLE:
            return model.size_bytes if column == SIZE_COLUMN else self._cells(model)[column].lower()
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(model)
        if role == Qt.ItemDataRole.TextAlignmentRole and column == SIZE_COLUMN:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    @staticmethod
    def _cells(model: LibraryModel) -> tuple[str, ...]:
        return (
            model.name,
            f"{model.format} + vision" if model.projectors else model.format,
            model.quantisation,
            format_bytes(model.size_bytes),
            mtp_text(model),
            model.location.label,
        )

    @staticmethod
    def _tooltip(model: LibraryModel) -> str:
        lines = [str(model.path), model.location.detail]
        if model.mtp.sidecar is not None:
            lines.append(f"Sidecar: {model.mtp.sidecar}")
        if model.mtp.note:
            lines.append(in_window_words(model.mtp.note))
        lines.extend(vision_lines(model))
        return "\n".join(lines)


class LibraryFilter(QSortFilterProxyModel):
    """Case-insensitive filter over every column; sorts sizes by bytes."""

    def __init__(self, source: LibraryTableModel, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.setSourceModel(source)
        self.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.setFilterKeyColumn(-1)
        self.setSortRole(SORT_ROLE)
