"""Help → Keyboard shortcuts: every shortcut the window answers to, read from its actions.

The list is built from the live actions (menus, pages, the chat page's own), so it cannot drift
from what the keys really do; keys handled inside a widget (Enter in the composer) are added
from one short table here.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QMenuBar,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

WIDGET_KEYS: tuple[tuple[str, str, str], ...] = (
    ("Chat", "Send the message", "Enter"),
    ("Chat", "New line in the message", "Shift+Enter"),
    ("Chat", "Leave the message box", "Tab"),
    ("Chat", "Stop the reply", "Esc"),
)


def shortcut_groups(
    menus: QMenuBar, page_actions: list[QAction], chat_actions: list[QAction]
) -> dict[str, list[QAction]]:
    """Every action with a shortcut, by where it works: the pages, each menu, the chat."""
    groups: dict[str, list[QAction]] = {"Pages": page_actions}
    for menu_action in menus.actions():
        menu = menu_action.menu()
        if menu is not None:
            actions = [action for action in menu.actions() if action not in page_actions]
            groups[menu_action.text().replace("&", "")] = actions
    if chat_actions:
        groups["Chat"] = chat_actions
    return groups


def shortcut_rows(groups: dict[str, list[QAction]]) -> list[tuple[str, str, str]]:
    """(where, what, keys) for every action with a shortcut, then the widget keys."""
    rows: list[tuple[str, str, str]] = []
    for where, actions in groups.items():
        for action in actions:
            keys = action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
            if keys:
                rows.append((where, action.text().replace("&", "").rstrip("…"), keys))
    return rows + list(WIDGET_KEYS)


class ShortcutsDialog(QDialog):
    def __init__(self, rows: list[tuple[str, str, str]], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        self.resize(560, 520)
        self.table = QTableWidget(len(rows), 3)
        self.table.setHorizontalHeaderLabels(["Where", "Action", "Keys"])
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QTableWidget.SelectionMode.NoSelection)
        self.table.setShowGrid(False)
        self.table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        for row, values in enumerate(rows):
            for column, value in enumerate(values):
                item = QTableWidgetItem(value)
                if column == 2:
                    item.setTextAlignment(
                        Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight
                    )
                self.table.setItem(row, column, item)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        intro = QLabel("Page shortcuts work everywhere; page actions work on their page.")
        intro.setObjectName("muted")
        layout.addWidget(intro)
        layout.addWidget(self.table, 1)
        layout.addWidget(buttons)
