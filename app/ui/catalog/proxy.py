"""Search and filters over the catalog tree; a group shows while any of its entries matches."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QObject, QPersistentModelIndex, QSortFilterProxyModel, Qt

from app.ui.catalog.model import HAS_SIDECAR_ROLE, IS_GROUP_ROLE, QUANT_ROLE, SEARCH_ROLE, TIER_ROLE

ANY = ""
WITH_SIDECAR = "with sidecar"
WITHOUT_SIDECAR = "without sidecar"


class CatalogFilterProxy(QSortFilterProxyModel):
    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.setRecursiveFilteringEnabled(True)
        self.setSortCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self._search: list[str] = []
        self._tier = ANY
        self._quant = ANY
        self._sidecar = ANY

    def set_search(self, text: str) -> None:
        self.beginFilterChange()
        self._search = text.lower().split()
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def set_tier(self, tier: str) -> None:
        self.beginFilterChange()
        self._tier = tier
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def set_quant(self, quant: str) -> None:
        self.beginFilterChange()
        self._quant = quant
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def set_sidecar(self, choice: str) -> None:
        self.beginFilterChange()
        self._sidecar = choice
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def filterAcceptsRow(
        self, source_row: int, source_parent: QModelIndex | QPersistentModelIndex
    ) -> bool:
        index = self.sourceModel().index(source_row, 0, source_parent)
        if index.data(IS_GROUP_ROLE):
            return False  # shown through recursive filtering when an entry of it matches
        text = index.data(SEARCH_ROLE) or ""
        if any(word not in text for word in self._search):
            return False
        if self._tier and index.data(TIER_ROLE) != self._tier:
            return False
        if self._quant and index.data(QUANT_ROLE) != self._quant:
            return False
        has_sidecar = bool(index.data(HAS_SIDECAR_ROLE))
        if self._sidecar == WITH_SIDECAR and not has_sidecar:
            return False
        return not (self._sidecar == WITHOUT_SIDECAR and has_sidecar)
