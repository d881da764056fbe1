"""The Server panel: start and stop a local OpenAI- and Anthropic-compatible server, see who
calls it and what it has loaded.

The server runs as a ``mtp-studio serve --log-format json`` subprocess (a :class:`QProcess`, so the
GUI thread never waits on it, and a crash in the server cannot take the window down): by default
for every model on disk, loaded on demand (the same Hugging Face cache and models folder the
window uses), or for the one model picked. Its stderr lines are read as they come: the
``listening`` event gives the URLs of both APIs to copy and a ready-to-paste client set-up for
each (:mod:`~app.engine.server.core.client_snippets`), each ``request`` event a line in the live
log and the latest decode speed and acceptance, each model load or unload a line. While it runs,
:class:`~app.ui.server.loaded_view.LoadedModelsView` shows the loaded models, their slots and the
requests being served, with an Unload button.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QProcess, QProcessEnvironment, Qt, QTimer, Signal
from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.core.demo_model import demo_model_path
from app.engine.runtime.core.request import MAX_DRAFT_DEPTH
from app.engine.runtime.speculative.depth_policy import AUTO, AUTO_MAX_DEPTH
from app.engine.server.core.client_snippets import (
    ClientSnippet,
    anthropic_base_url,
    client_snippets,
)
from app.engine.server.core.config import DEFAULT_PORT
from app.engine.server.core.model_log import model_event_line
from app.engine.server.core.request_log import RequestLogEntry
from app.engine.settings import hf_hub_cache
from app.ui.server.loaded_view import LoadedModelsView

LOG_LINES = 500
STOP_GRACE_MS = 5000
AUTO_DEPTH_VALUE = -1
"""The depth spin box's minimum, shown as ``AUTO_DEPTH_TEXT``: the depth adapts each cycle."""
AUTO_DEPTH_TEXT = "Auto (recommended)"
LIBRARY = ""
"""The model picker's data for "every model on disk"."""
LIBRARY_TEXT = "Every model on disk (loaded on demand)"


def serve_command(*args: str) -> list[str]:
    """How to run ``mtp-studio serve`` from this installation (the bundle or a virtualenv)."""
    if getattr(sys, "frozen", False):
        return [sys.executable, "serve", *args]
    return [sys.executable, "-m", "app", "serve", *args]


MIN_TEXT_BOX_HEIGHT = 44
"""Pixels the snippet and log boxes may shrink to (about two lines)."""


class ServerPanel(QWidget):
    """Model, port and depth; Start/Stop; both APIs' URLs and client snippets, each with a Copy
    button; the loaded models and the requests being served; the live request log. The default
    serves every model on disk; one model can be picked from the GGUF models the Models page
    found (:meth:`set_models`) or a file chosen with Browse…."""

    url_changed = Signal(str)  # "" while no server listens
    request_logged = Signal(object)  # RequestLogEntry

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._process: QProcess | None = None
        self._pending = ""
        self._stopping = False
        self.url = ""
        self.requests_served = 0
        form = QFormLayout()
        form.addRow("Model", self._build_model_row())
        form.addRow("Port", self._build_port())
        form.addRow("MTP depth", self._build_depth())
        form.addRow("OpenAI URL", self._build_urls())
        form.addRow("Anthropic URL", self._anthropic_row)
        form.addRow("Client", self._build_snippets())
        self.start_button = QPushButton("Start")
        self.start_button.setProperty("primary", True)
        self.start_button.clicked.connect(self.start)
        self.stop_button = QPushButton("Stop")
        self.stop_button.clicked.connect(self.stop)
        self.stop_button.setEnabled(False)
        buttons = QHBoxLayout()
        buttons.addWidget(self.start_button)
        buttons.addWidget(self.stop_button)
        buttons.addStretch(1)
        self.status_label = QLabel("Stopped")
        self.figures_label = QLabel("No requests yet")
        self.log_view = QPlainTextEdit()
        self.log_view.setReadOnly(True)
        self.log_view.setMaximumBlockCount(LOG_LINES)
        self.log_view.setMinimumHeight(MIN_TEXT_BOX_HEIGHT)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.snippet_view)
        layout.addLayout(buttons)
        layout.addWidget(self.status_label)
        layout.addWidget(self.figures_label)
        self.loaded_view = LoadedModelsView()
        layout.addWidget(self.loaded_view, 1)
        layout.addWidget(self.log_view, 1)
        application = QCoreApplication.instance()
        if application is not None:
            application.aboutToQuit.connect(self.shutdown)

    def _build_model_row(self) -> QHBoxLayout:
        self.model_picker = QComboBox()
        self.model_picker.setObjectName("serverModel")
        self.model_picker.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.model_picker.setMinimumContentsLength(20)
        self.model_picker.setPlaceholderText("Choose a .gguf model")
        self.model_picker.addItem(LIBRARY_TEXT, LIBRARY)
        self.model_picker.setItemData(
            0,
            "Every model of the Models page, each loaded when a request names it",
            Qt.ItemDataRole.ToolTipRole,
        )
        self.model_picker.setCurrentIndex(0)
        demo = self._default_model()
        if demo is not None:
            self.add_model(demo, f"{demo.name} (bundled demo)")
        browse = QPushButton("Browse…")
        browse.setToolTip("Serve another .gguf file")
        browse.clicked.connect(self._browse)
        model_row = QHBoxLayout()
        model_row.addWidget(self.model_picker, 1)
        model_row.addWidget(browse)
        return model_row

    def _build_port(self) -> QSpinBox:
        self.port_spin = QSpinBox()
        self.port_spin.setRange(1, 65535)
        self.port_spin.setValue(DEFAULT_PORT)
        return self.port_spin

    def _build_depth(self) -> QSpinBox:
        self.depth_spin = QSpinBox()
        self.depth_spin.setRange(AUTO_DEPTH_VALUE, MAX_DRAFT_DEPTH)
        self.depth_spin.setSpecialValueText(AUTO_DEPTH_TEXT)
        self.depth_spin.setValue(AUTO_DEPTH_VALUE)
        self.depth_spin.setToolTip(
            f"MTP tokens drafted per cycle. Auto chooses 0 to {AUTO_MAX_DEPTH} before each cycle "
            "from the measured acceptance and speed, and remembers it per model; 0 = plain "
            "decoding. A request's own mtp_depth overrides it."
        )
        return self.depth_spin

    def _build_urls(self) -> QHBoxLayout:
        self.url_edit = QLineEdit()
        self.url_edit.setReadOnly(True)
        self.url_edit.setPlaceholderText("not running")
        self.copy_button = QPushButton("Copy")
        self.copy_button.setEnabled(False)
        self.copy_button.clicked.connect(self._copy_url)
        url_row = QHBoxLayout()
        url_row.addWidget(self.url_edit, 1)
        url_row.addWidget(self.copy_button)
        self.anthropic_url_edit = QLineEdit()
        self.anthropic_url_edit.setReadOnly(True)
        self.anthropic_url_edit.setPlaceholderText("not running")
        self.anthropic_url_edit.setToolTip(
            "Base URL for Anthropic clients and Claude Code (they add /v1/messages)"
        )
        self.copy_anthropic_button = QPushButton("Copy")
        self.copy_anthropic_button.setEnabled(False)
        self.copy_anthropic_button.clicked.connect(
            lambda: QGuiApplication.clipboard().setText(self.anthropic_url_edit.text())
        )
        self._anthropic_row = QHBoxLayout()
        self._anthropic_row.addWidget(self.anthropic_url_edit, 1)
        self._anthropic_row.addWidget(self.copy_anthropic_button)
        return url_row

    def _build_snippets(self) -> QHBoxLayout:
        self.snippets: tuple[ClientSnippet, ...] = ()
        self.snippet_choice = QComboBox()
        self.snippet_choice.currentIndexChanged.connect(self._show_snippet)
        self.snippet_view = QPlainTextEdit()
        self.snippet_view.setReadOnly(True)
        self.snippet_view.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.snippet_view.setPlaceholderText("Start the server to see how clients connect")
        self.snippet_view.setMaximumHeight(170)
        # both text boxes may shrink to a few lines, so the page never makes the window taller
        # than a small screen (a QStackedWidget is as tall as its tallest page's minimum)
        self.snippet_view.setMinimumHeight(MIN_TEXT_BOX_HEIGHT)
        self.copy_snippet_button = QPushButton("Copy")
        self.copy_snippet_button.setEnabled(False)
        self.copy_snippet_button.clicked.connect(
            lambda: QGuiApplication.clipboard().setText(self.snippet_view.toPlainText())
        )
        snippet_row = QHBoxLayout()
        snippet_row.addWidget(self.snippet_choice, 1)
        snippet_row.addWidget(self.copy_snippet_button)
        return snippet_row

    # -- the model to serve -------------------------------------------------------------------

    def set_models(self, models: list[tuple[str, Path]]) -> None:
        """The GGUF models on disk (``(name, path)``); the chosen one stays chosen."""
        chosen = self.model_path()
        for name, path in models:
            self.add_model(path, name)
        if chosen is not None:
            self.choose_model(chosen)

    def add_model(self, path: Path, name: str = "") -> None:
        """List ``path`` (once) under ``name`` (its file name by default)."""
        if self.model_picker.findData(str(path)) < 0:
            self.model_picker.addItem(name or path.name, str(path))
            self.model_picker.setItemData(
                self.model_picker.count() - 1, str(path), Qt.ItemDataRole.ToolTipRole
            )
        if self.model_picker.currentIndex() < 0:
            self.choose_model(path)

    def choose_model(self, path: Path) -> None:
        self.model_picker.setCurrentIndex(self.model_picker.findData(str(path)))

    def model_path(self) -> Path | None:
        """The one model chosen (None: every model on disk, or none chosen)."""
        data = self.model_picker.currentData()
        return Path(data) if isinstance(data, str) and data != LIBRARY else None

    @property
    def serves_library(self) -> bool:
        return self.model_picker.currentData() == LIBRARY

    @property
    def running(self) -> bool:
        return self._process is not None

    def mtp_depth(self) -> str:
        """The chosen ``--mtp-depth``: ``auto`` or a whole number."""
        value = self.depth_spin.value()
        return AUTO if value == AUTO_DEPTH_VALUE else str(value)

    def start(self) -> None:
        if self._process is not None:
            return
        model = self.model_path()
        if not self.serves_library and (model is None or not model.is_file()):
            where = f"at {model}" if model is not None else "chosen"
            self.status_label.setText(f"No model {where}: choose a .gguf file")
            return
        chosen = () if model is None else ("--model", str(model))
        program, *arguments = serve_command(
            *chosen,
            "--port",
            str(self.port_spin.value()),
            "--mtp-depth",
            self.mtp_depth(),
            "--log-format",
            "json",
        )
        process = QProcess(self)
        process.setProgram(program)
        process.setArguments(arguments)
        environment = QProcessEnvironment.systemEnvironment()
        environment.insert("HF_HUB_CACHE", str(hf_hub_cache()))  # the cache this window reads
        process.setProcessEnvironment(environment)
        process.readyReadStandardError.connect(self._read_stderr)
        process.finished.connect(self._finished)
        self._process = process
        self._pending = ""
        self._stopping = False
        self._set_controls(running=True)
        self.status_label.setText(f"Loading {model.name}…" if model else "Starting…")
        process.start()

    def stop(self) -> None:
        process = self._process
        if process is None:
            return
        self.status_label.setText("Stopping…")
        self._stopping = True
        process.terminate()
        QTimer.singleShot(STOP_GRACE_MS, lambda: self._kill_if_running(process))

    def shutdown(self) -> None:
        """On quit: stop the server without waiting for a graceful end."""
        if self._process is not None:
            self._process.kill()
            self._process.waitForFinished(STOP_GRACE_MS)

    # --- process output -------------------------------------------------------------------

    def _read_stderr(self) -> None:
        if self._process is None:
            return
        self._pending += bytes(self._process.readAllStandardError().data()).decode(errors="replace")
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            self._handle_line(line.strip())

    def _handle_line(self, line: str) -> None:
        if not line:
            return
        entry = RequestLogEntry.from_json(line)
        if entry is not None:
            self._show_request(entry)
            return
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        if isinstance(event, dict) and model_event_line(event) is not None:
            self.log_view.appendPlainText(model_event_line(event))
            self.loaded_view.poll()
        elif isinstance(event, dict) and event.get("event") == "listening":
            self.url = str(event["url"])
            self.url_edit.setText(self.url)
            self.copy_button.setEnabled(True)
            self.anthropic_url_edit.setText(anthropic_base_url(self.url))
            self.copy_anthropic_button.setEnabled(True)
            model = event.get("model")
            self._set_snippets(client_snippets(self.url, str(model or event.get("example_model"))))
            depth = event.get("mtp_depth", self.mtp_depth())
            served = model or f"{event.get('models')} models on disk (loaded on demand)"
            self.status_label.setText(f"Serving {served} at {self.url} · MTP depth {depth}")
            self.loaded_view.watch(self.url)
            self.url_changed.emit(self.url)
        else:
            self.log_view.appendPlainText(line)  # start-up errors, tracebacks

    def _show_request(self, entry: RequestLogEntry) -> None:
        self.log_view.appendPlainText(entry.to_text())
        if entry.finish_reason is not None:
            self.requests_served += 1
            speed = entry.decode_tokens_per_second
            figures = f"{self.requests_served} replies · last {speed:.1f} tok/s"
            if entry.acceptance_by_depth:
                rates = " / ".join(f"{rate:.0%}" for rate in entry.acceptance_by_depth)
                figures += f" · acceptance by depth {rates}"
                figures += f" · {entry.tokens_per_cycle:.2f} tokens/cycle"
            self.figures_label.setText(figures)
        self.request_logged.emit(entry)

    def _finished(self, exit_code: int, _status: QProcess.ExitStatus) -> None:
        self._read_stderr()
        if self._pending.strip():
            self._handle_line(self._pending.strip())
        self._process = None
        self.url = ""
        self.url_edit.clear()
        self.anthropic_url_edit.clear()
        self._set_snippets(())
        self.loaded_view.watch("")
        self.url_changed.emit("")
        self._set_controls(running=False)
        if self._stopping or exit_code == 0:
            self.status_label.setText("Stopped")
        else:
            self.status_label.setText(f"The server stopped (exit code {exit_code}); see the log")

    # --- helpers ----------------------------------------------------------------------------

    def _set_controls(self, *, running: bool) -> None:
        self.start_button.setEnabled(not running)
        self.stop_button.setEnabled(running)
        for button in (self.copy_button, self.copy_anthropic_button):
            button.setEnabled(False)
        for widget in (self.model_picker, self.port_spin, self.depth_spin):
            widget.setEnabled(not running)

    def _kill_if_running(self, process: QProcess) -> None:
        if process is self._process and process.state() != QProcess.ProcessState.NotRunning:
            process.kill()

    def _set_snippets(self, snippets: tuple[ClientSnippet, ...]) -> None:
        self.snippets = snippets
        self.snippet_choice.blockSignals(True)
        self.snippet_choice.clear()
        self.snippet_choice.addItems([snippet.title for snippet in snippets])
        self.snippet_choice.blockSignals(False)
        self.copy_snippet_button.setEnabled(bool(snippets))
        self._show_snippet(0)

    def _show_snippet(self, index: int) -> None:
        if 0 <= index < len(self.snippets):
            self.snippet_view.setPlainText(self.snippets[index].text)
        else:
            self.snippet_view.clear()

    def _copy_url(self) -> None:
        QGuiApplication.clipboard().setText(self.url)

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Model to serve", "", "GGUF models (*.gguf)")
        if path:
            self.add_model(Path(path))
            self.choose_model(Path(path))

    @staticmethod
    def _default_model() -> Path | None:
        try:
            return demo_model_path()
        except RuntimeBackendError:
            return None
