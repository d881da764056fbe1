"""“Connect to a server…”: add, choose and remove saved connections to OpenAI-compatible servers.

The user types the server's URL, its API key (masked as it is typed), an optional model and a
name. "List models" asks the server for its /v1/models in the background and offers them; the
saved connections are listed with their keys masked and can be removed. Saving writes the
connection (key included) to the owner-only connections file, never to the settings.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.chat.connections import Connection, ConnectionStore, validated
from app.engine.errors import MtpStudioError
from app.engine.remote.client import RemoteEndpoint
from app.ui.background import run_in_background
from app.ui.errors import readable
from app.ui.look.tones import tone_style

FIRST_MODEL = "(the server's first model)"


def connection_text(connection: Connection) -> str:
    """How a saved connection is listed: never with its key in clear."""
    model = connection.model or "first model"
    return f"{connection.name} — {connection.url} · {model} · key {connection.masked_key}"


def _list_models(url: str, api_key: str) -> list[str]:
    with RemoteEndpoint(url, api_key=api_key or None) as endpoint:
        return endpoint.models()


class ConnectDialog(QDialog):
    """``chosen(connection)`` once a connection is saved (to use it now); ``removed(name)``."""

    chosen = Signal(object)
    removed = Signal(str)

    def __init__(self, store: ConnectionStore, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Connect to a server")
        self.setObjectName("connectDialog")
        self._store = store
        self.url = QLineEdit()
        self.url.setPlaceholderText("http://host:8000/v1")
        self.api_key = QLineEdit()
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.api_key.setPlaceholderText("none")
        self.model = QComboBox()
        self.model.setEditable(True)
        self.model.lineEdit().setPlaceholderText(FIRST_MODEL)
        self.list_models_button = QPushButton("List models")
        self.list_models_button.setToolTip("Ask the server for its models (GET /v1/models)")
        self.list_models_button.clicked.connect(self.list_models)
        self.name = QLineEdit()
        self.name.setPlaceholderText("the URL")
        self.status = QLabel()
        self.status.setObjectName("connectStatus")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.saved = QListWidget()
        self.saved.setObjectName("savedConnections")
        self.use_button = QPushButton("Use")
        self.use_button.clicked.connect(self._use_selected)
        self.remove_button = QPushButton("Remove")
        self.remove_button.clicked.connect(self._remove_selected)

        model_row = QHBoxLayout()
        model_row.addWidget(self.model, 1)
        model_row.addWidget(self.list_models_button)
        form = QFormLayout()
        form.addRow("Server URL", self.url)
        form.addRow("API key", self.api_key)
        form.addRow("Model", model_row)
        form.addRow("Name", self.name)
        saved_buttons = QHBoxLayout()
        saved_buttons.addStretch(1)
        saved_buttons.addWidget(self.use_button)
        saved_buttons.addWidget(self.remove_button)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.save_button = buttons.addButton(
            "Save and connect", QDialogButtonBox.ButtonRole.AcceptRole
        )
        buttons.accepted.connect(self.save)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.status)
        layout.addWidget(QLabel("<b>Saved connections</b>"))
        layout.addWidget(self.saved, 1)
        layout.addLayout(saved_buttons)
        layout.addWidget(buttons)
        self.resize(620, 460)
        self.refresh()

    def refresh(self) -> None:
        self.saved.clear()
        try:
            connections = self._store.load()
        except MtpStudioError as exc:
            self._show_status(readable(exc), error=True)
            connections = []
        for connection in connections:
            item = QListWidgetItem(connection_text(connection))
            item.setData(Qt.ItemDataRole.UserRole, connection.name)
            self.saved.addItem(item)

    def list_models(self) -> None:
        """Fill the model list from the server, in the background."""
        url, key = self.url.text().strip(), self.api_key.text().strip()
        self.list_models_button.setEnabled(False)
        self._show_status(f"Asking {url} for its models…", error=False)
        run_in_background(lambda: _list_models(url, key), self._on_models, self._on_models_failed)

    def _on_models(self, models: list[str]) -> None:
        self.list_models_button.setEnabled(True)
        typed = self.model.currentText()
        self.model.clear()
        self.model.addItems(models)
        self.model.setEditText(typed or (models[0] if models else ""))
        self._show_status(f"The server lists {len(models)} model(s).", error=False)

    def _on_models_failed(self, exc: BaseException) -> None:
        self.list_models_button.setEnabled(True)
        self._show_status(readable(exc), error=True)

    def save(self) -> None:
        """Save what is typed and use it; a bad URL is said in the dialog, which stays open."""
        try:
            connection = validated(
                self.name.text(), self.url.text(), self.model.currentText(), self.api_key.text()
            )
            self._store.add(connection)
        except (MtpStudioError, OSError) as exc:
            self._show_status(str(exc), error=True)
            return
        self._clear_form()
        self.refresh()
        self.chosen.emit(connection)
        self.accept()

    def _clear_form(self) -> None:
        """The key must not wait, even masked, in a dialog that is opened again."""
        for field in (self.url, self.api_key, self.name):
            field.clear()
        self.model.clear()
        self.model.setEditText("")
        self.status.clear()

    def _selected_name(self) -> str | None:
        item = self.saved.currentItem()
        return item.data(Qt.ItemDataRole.UserRole) if item is not None else None

    def _use_selected(self) -> None:
        name = self._selected_name()
        match = next((c for c in self._store.load() if c.name == name), None)
        if match is not None:
            self.chosen.emit(match)
            self.accept()

    def _remove_selected(self) -> None:
        name = self._selected_name()
        if name is None:
            return
        try:
            self._store.remove(name)
        except (MtpStudioError, OSError) as exc:
            self._show_status(str(exc), error=True)
            return
        self.refresh()
        self.removed.emit(name)

    def _show_status(self, text: str, *, error: bool) -> None:
        self.status.setStyleSheet(tone_style("error") if error else "")
        self.status.setText(text)
