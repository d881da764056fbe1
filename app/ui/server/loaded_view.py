"""The Server page's view of a running server: the models it has loaded, the slots in use, the
requests it serves or keeps waiting, and an Unload button.

It polls the server's ``GET /v1/status`` once a second while the server runs (each poll in a
background thread, so the window never waits on it; a poll still out skips the next) and unloads
the selected model with ``POST /models/unload`` (docs/server-api.md#status-and-unloading).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.engine.remote.serve_admin import fetch_status, unload
from app.engine.units import format_bytes
from app.ui.background import run_in_background
from app.ui.errors import readable

POLL_MS = 1000
MODEL_COLUMNS = (
    "Model",
    "State",
    "Slots in use",
    "Waiting",
    "Memory (est. / resident)",
    "Unloads in",
)
CLIENT_COLUMNS = ("Request", "Model", "State", "Endpoint", "Client", "Time", "Tokens")
TABLE_MIN_HEIGHT = 60


class LoadedModelsView(QWidget):
    """Loaded models and per-client streams of the server at :meth:`watch`'s URL."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._url = ""
        self._polling = False
        self.last_status: dict[str, Any] | None = None
        self.summary = QLabel("Loaded models appear here while the server runs")
        self.models_table = _table(MODEL_COLUMNS)
        self.models_table.itemSelectionChanged.connect(self._selection_changed)
        self.clients_table = _table(CLIENT_COLUMNS)
        self.unload_button = QPushButton("Unload")
        self.unload_button.setToolTip("Unload the selected model now (it loads again when asked)")
        self.unload_button.setEnabled(False)
        self.unload_button.clicked.connect(self.unload_selected)
        header = QHBoxLayout()
        header.addWidget(self.summary, 1)
        header.addWidget(self.unload_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(header)
        layout.addWidget(self.models_table)
        layout.addWidget(QLabel("Requests being served or waiting"))
        layout.addWidget(self.clients_table)
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self.poll)

    def watch(self, url: str) -> None:
        """Start polling the server at ``url`` ("" stops)."""
        self._url = url
        if url:
            self._timer.start()
            self.poll()
        else:
            self._timer.stop()
            self.last_status = None
            self.models_table.setRowCount(0)
            self.clients_table.setRowCount(0)
            self.summary.setText("Loaded models appear here while the server runs")
            self._selection_changed()

    def poll(self) -> None:
        if not self._url or self._polling:
            return
        self._polling = True
        url = self._url
        run_in_background(lambda: fetch_status(url), self._show, self._poll_failed)

    def selected_model(self) -> str | None:
        rows = self.models_table.selectionModel().selectedRows()
        if not rows:
            return None
        item = self.models_table.item(rows[0].row(), 0)
        return item.text() if item is not None else None

    def unload_selected(self) -> None:
        model, url = self.selected_model(), self._url
        if model is None or not url:
            return
        self.unload_button.setEnabled(False)
        self.summary.setText(f"Unloading {model}…")
        run_in_background(lambda: unload(url, model), self._unloaded, self._unload_failed)

    # --- results, on the GUI thread ----------------------------------------------------------

    def _show(self, status: dict[str, Any]) -> None:
        self._polling = False
        if not self._url:
            return
        self.last_status = status
        chosen = self.selected_model()
        loaded = status.get("loaded", [])
        _fill(self.models_table, [_model_cells(model) for model in loaded])
        _fill(self.clients_table, [_client_cells(client) for client in status.get("clients", [])])
        for row, model in enumerate(loaded):
            if model.get("id") == chosen:
                self.models_table.selectRow(row)
        memory = status.get("memory", {})
        self.summary.setText(
            f"{len(loaded)} of {status.get('models_available', 0)} models loaded · memory ≈ "
            f"{format_bytes(memory.get('estimated_bytes') or 0)} estimated, "
            f"{format_bytes(memory.get('resident_bytes') or 0)} in use"
        )
        self._selection_changed()

    def _poll_failed(self, exc: BaseException) -> None:
        self._polling = False
        if self._url:
            self.summary.setText(f"Status unavailable: {readable(exc)}")

    def _unloaded(self, answer: dict[str, Any]) -> None:
        model = answer.get("model")
        done = "unloaded" if answer.get("unloaded") else f"not unloaded ({answer.get('state')})"
        self.summary.setText(f"{model}: {done}")
        self.poll()

    def _unload_failed(self, exc: BaseException) -> None:
        self.summary.setText(f"Not unloaded: {readable(exc)}")
        self._selection_changed()

    def _selection_changed(self) -> None:
        self.unload_button.setEnabled(bool(self._url) and self.selected_model() is not None)


def _table(columns: tuple[str, ...]) -> QTableWidget:
    table = QTableWidget(0, len(columns))
    table.setHorizontalHeaderLabels(list(columns))
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.verticalHeader().setVisible(False)
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    table.horizontalHeader().setStretchLastSection(True)
    table.setMinimumHeight(TABLE_MIN_HEIGHT)
    return table


def _fill(table: QTableWidget, rows: list[tuple[str, ...]]) -> None:
    table.setRowCount(len(rows))
    for row, cells in enumerate(rows):
        for column, text in enumerate(cells):
            table.setItem(row, column, QTableWidgetItem(text))


def _model_cells(model: dict[str, Any]) -> tuple[str, ...]:
    slots = model.get("slots", {})
    memory = model.get("memory", {})
    resident = memory.get("resident_bytes")
    unload_in = model.get("unload_in_seconds")
    return (
        str(model.get("id")),
        str(model.get("state")),
        f"{slots.get('busy', 0)} of {slots.get('total', 0)}",
        str(model.get("waiting", 0)),
        f"{format_bytes(memory.get('estimated_bytes') or 0)} / "
        f"{format_bytes(resident) if resident is not None else '?'}",
        f"{unload_in:.0f} s" if isinstance(unload_in, int | float) else "—",
    )


def _client_cells(client: dict[str, Any]) -> tuple[str, ...]:
    kind = "stream" if client.get("stream") else "whole reply"
    tokens = ""
    if client.get("state") == "running":
        tokens = (
            f"{client.get('generated_tokens', 0)} · {client.get('tokens_per_second', 0):.1f} tok/s"
        )
    return (
        str(client.get("id")),
        str(client.get("model")),
        str(client.get("state")),
        f"{client.get('endpoint')} ({kind})",
        str(client.get("client")),
        f"{client.get('seconds', 0):.1f} s",
        tokens,
    )
