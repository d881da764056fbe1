"""The conversations list: search, new, rename, delete, export.

The list shows what the history store returns (newest first, searched in titles and message
text); it never holds conversation content itself, so what it shows is always what is stored.
"""

from __future__ import annotations

from datetime import datetime

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.chat.conversation import ConversationSummary
from app.ui.icons import icon


class ConversationList(QWidget):
    """Emits the chosen conversation id and the user's list actions."""

    selected = Signal(int)
    new_requested = Signal()
    rename_requested = Signal(int)
    delete_requested = Signal(int)
    export_requested = Signal(int, str)
    search_changed = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search conversations")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self.search_changed.emit)
        self.new_button = QPushButton("New conversation")
        self.new_button.setIcon(icon("plus"))
        self.new_button.setToolTip("Start a new conversation (Ctrl+N)")
        self.new_button.clicked.connect(self.new_requested.emit)
        self.list = QListWidget()
        self.list.setObjectName("conversations")
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.currentItemChanged.connect(self._on_current)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(
            lambda _pos: self._menu().exec(self.cursor().pos())
        )

        self.rename_button = QToolButton()
        self.rename_button.setText("Rename")
        self.rename_button.clicked.connect(lambda: self._emit_for_current(self.rename_requested))
        self.delete_button = QToolButton()
        self.delete_button.setText("Delete")
        self.delete_button.setIcon(icon("trash"))
        self.delete_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.delete_button.clicked.connect(lambda: self._emit_for_current(self.delete_requested))
        self.export_button = QToolButton()
        self.export_button.setText("Export")
        self.export_button.setIcon(icon("upload"))
        self.export_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        export_menu = QMenu(self.export_button)
        export_menu.addAction("Markdown (.md)…", lambda: self._export("md"))
        export_menu.addAction("JSON (.json)…", lambda: self._export("json"))
        self.export_button.setMenu(export_menu)
        buttons = QHBoxLayout()
        buttons.setSpacing(2)
        buttons.addWidget(self.rename_button)
        buttons.addWidget(self.delete_button)
        buttons.addWidget(self.export_button)
        buttons.addStretch(1)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(self.new_button)
        layout.addWidget(self.search)
        layout.addWidget(self.list, 1)
        layout.addLayout(buttons)
        self._updating = False
        self._update_buttons()

    @property
    def current_id(self) -> int | None:
        item = self.list.currentItem()
        return int(item.data(Qt.ItemDataRole.UserRole)) if item is not None else None

    def show_conversations(self, summaries: list[ConversationSummary], current: int | None) -> None:
        """Fill the list; keep ``current`` selected without emitting ``selected``."""
        self._updating = True
        try:
            self.list.clear()
            for summary in summaries:
                item = QListWidgetItem(f"{summary.title}\n{_when(summary.updated_at)}")
                item.setData(Qt.ItemDataRole.UserRole, summary.id)
                item.setToolTip(f"{summary.title} · {summary.message_count} message(s)")
                self.list.addItem(item)
                if summary.id == current:
                    self.list.setCurrentItem(item)
        finally:
            self._updating = False
        self._update_buttons()

    def _on_current(self, current: QListWidgetItem | None, _previous: object) -> None:
        self._update_buttons()
        if current is not None and not self._updating:
            self.selected.emit(int(current.data(Qt.ItemDataRole.UserRole)))

    def _update_buttons(self) -> None:
        has = self.current_id is not None
        for button in (self.rename_button, self.delete_button, self.export_button):
            button.setEnabled(has)

    def _emit_for_current(self, signal: Signal) -> None:
        conversation_id = self.current_id
        if conversation_id is not None:
            signal.emit(conversation_id)  # type: ignore[attr-defined]

    def _export(self, kind: str) -> None:
        conversation_id = self.current_id
        if conversation_id is not None:
            self.export_requested.emit(conversation_id, kind)

    def _menu(self) -> QMenu:
        menu = QMenu(self)
        menu.addAction("Rename…", lambda: self._emit_for_current(self.rename_requested))
        menu.addAction("Export as Markdown…", lambda: self._export("md"))
        menu.addAction("Export as JSON…", lambda: self._export("json"))
        menu.addSeparator()
        menu.addAction("Delete", lambda: self._emit_for_current(self.delete_requested))
        return menu


def _when(timestamp: float) -> str:
    moment = datetime.fromtimestamp(timestamp)
    if moment.date() == datetime.now().date():
        return moment.strftime("today %H:%M")
    return moment.strftime("%Y-%m-%d %H:%M")
