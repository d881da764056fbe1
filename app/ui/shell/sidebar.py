"""The sidebar: one row per page, the current one highlighted; choosing a row switches pages.

A ``QListWidget`` named ``sidebar`` (the theme styles it): keyboard navigation, accessibility
names and high-DPI icons come with it. Below the pages sit the app's own corner actions (the
light/dark toggle), so the sidebar is the one place to move around the app.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.ui.resources import app_icon
from app.ui.shell.pages import PAGES

ICON_SIZE = QSize(20, 20)
WIDTH = 184


class Sidebar(QFrame):
    """The page list; ``page_chosen(key)`` when the user picks a row."""

    page_chosen = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sidebarPanel")
        self.setFixedWidth(WIDTH)
        self.brand = QLabel("MTP Studio")
        self.brand.setObjectName("sectionTitle")
        logo = QLabel()
        logo.setPixmap(app_icon().pixmap(QSize(28, 28), self.devicePixelRatioF()))
        brand_row = QHBoxLayout()
        brand_row.setContentsMargins(8, 0, 0, 4)
        brand_row.setSpacing(8)
        brand_row.addWidget(logo)
        brand_row.addWidget(self.brand, 1)
        self.list = QListWidget()
        self.list.setObjectName("sidebar")
        self.list.setIconSize(ICON_SIZE)
        self.list.setFrameShape(QFrame.Shape.NoFrame)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setAccessibleName("Pages")
        for spec in PAGES:
            item = QListWidgetItem(spec.title)
            item.setData(Qt.ItemDataRole.UserRole, spec.key)
            item.setToolTip(f"{spec.summary} ({spec.shortcut})")
            self.list.addItem(item)
        self.list.currentItemChanged.connect(self._on_current)
        self.theme_button = QToolButton()
        self.theme_button.setObjectName("themeToggle")
        self.theme_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.theme_button.setAutoRaise(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 12, 8, 8)
        layout.setSpacing(8)
        layout.addLayout(brand_row)
        layout.addWidget(self.list, 1)
        layout.addWidget(self.theme_button)

    @property
    def current_key(self) -> str:
        item = self.list.currentItem()
        return str(item.data(Qt.ItemDataRole.UserRole)) if item is not None else ""

    def select(self, key: str) -> None:
        """Highlight ``key``'s row (emits ``page_chosen`` when it changes)."""
        for row in range(self.list.count()):
            if self.list.item(row).data(Qt.ItemDataRole.UserRole) == key:
                self.list.setCurrentRow(row)
                return

    def set_icons(self, icon_for: Callable[[str], QIcon]) -> None:
        """Give every row its icon (again after a theme change re-tints them)."""
        for row, spec in enumerate(PAGES):
            self.list.item(row).setIcon(icon_for(spec.icon))

    def _on_current(self, current: QListWidgetItem | None, _previous: object) -> None:
        if current is not None:
            self.page_chosen.emit(str(current.data(Qt.ItemDataRole.UserRole)))
