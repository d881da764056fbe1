"""The strip above the conversation: model picker, what the model is, and what runs it.

One row holds what is done most: the side panels' toggles (conversations, settings), the picker,
Open (a GGUF file, a model folder, or look again), Unload, and the load state with the memory the
inference worker holds ("RAM in use") and, beside it, the projector pictures are read with (see
:mod:`~app.ui.chat.widgets.projector_row`). Under it, the chosen model's info line (see
:mod:`~app.ui.chat.widgets.model_text`), the offer to add an MTP head, and the backend line (CPU /
CUDA / Metal; the reason in full when a better accelerator exists but is not used, else in its
tooltip). Everything wraps or elides, so the strip fits a window of 800 px.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QComboBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QMenu,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QWidget,
)

from app.engine.chat.accelerator import AcceleratorReport
from app.engine.chat.connections import Connection
from app.engine.chat.memory import physical_memory_bytes
from app.engine.chat.model_files import ModelDescription
from app.engine.load_options import LoadOptions
from app.engine.runtime.backends.choice import MLX
from app.engine.units import format_bytes
from app.ui.chat.widgets.model_text import (
    can_offer_graft,
    describe_html,
    item_text,
    sidecar_label,
)
from app.ui.chat.widgets.projector_row import ProjectorRow
from app.ui.icons import icon
from app.ui.look.tones import tone_color, tone_style
from app.ui.wording import in_window_words

CONNECT_ITEM = "Connect to a server…"
PICKER_CHARACTERS = 14
"""The picker's least width in characters; it grows with the window."""


def _tool_button(
    text: str,
    icon_name: str,
    tip: str,
    style: Qt.ToolButtonStyle = Qt.ToolButtonStyle.ToolButtonIconOnly,
) -> QToolButton:
    button = QToolButton()
    button.setText(text)
    button.setIcon(icon(icon_name))
    button.setToolTip(tip)
    button.setAccessibleName(text)
    button.setToolButtonStyle(style)
    return button


class ModelBar(QWidget):
    """The picker lists local models, then saved server connections (``remote_chosen``), then
    "Connect to a server…" (``connect_requested``)."""

    model_chosen = Signal(object)
    remote_chosen = Signal(object)
    connect_requested = Signal()
    open_file_requested = Signal()
    open_folder_requested = Signal()
    refresh_requested = Signal()
    unload_requested = Signal()
    graft_requested = Signal(object)
    graft_cancel_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("modelBar")
        self._models: list[ModelDescription] = []
        self._connections: list[Connection] = []
        self._remote: Connection | None = None
        self._shown: ModelDescription | None = None
        self._memory = physical_memory_bytes()
        self._load_options = LoadOptions()
        self._grafting = False
        self._accelerator_text = "Backend: checking…"
        self._accelerator_tooltip = ""
        self._drafting_stopped: str | None = None
        self._build_controls()
        self._build_labels()
        self._lay_out()

    def _build_controls(self) -> None:
        self.conversations_toggle = _tool_button(
            "Conversations", "chat", "Show or hide the conversations"
        )
        self.settings_toggle = _tool_button(
            "Settings", "settings", "Show or hide the chat's settings: system prompt, sampling, MTP"
        )
        for toggle in (self.conversations_toggle, self.settings_toggle):
            toggle.setCheckable(True)
            toggle.setChecked(True)
        self.picker = QComboBox()
        self.picker.setObjectName("modelPicker")
        self.picker.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.picker.setMinimumContentsLength(PICKER_CHARACTERS)
        self.picker.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.picker.setPlaceholderText("Looking for models…")
        self.picker.setToolTip("The model the chat talks to, or a server")
        self.picker.activated.connect(self._on_activated)
        self.open_file_action = QAction("Open a GGUF file…", self)
        self.open_file_action.triggered.connect(self.open_file_requested.emit)
        self.open_folder_action = QAction("Open a model folder…", self)
        self.open_folder_action.setToolTip("A Hugging Face folder: config.json + safetensors")
        self.open_folder_action.triggered.connect(self.open_folder_requested.emit)
        self.refresh_action = QAction("Look for models again", self)
        self.refresh_action.triggered.connect(self.refresh_requested.emit)
        self.open_menu = QMenu(self)
        for action in (self.open_file_action, self.open_folder_action):
            self.open_menu.addAction(action)
        self.open_menu.addSeparator()
        self.open_menu.addAction(self.refresh_action)
        self.open_button = _tool_button(
            "Open",
            "folder",
            "Open a GGUF file or a model folder",
            Qt.ToolButtonStyle.ToolButtonTextBesideIcon,
        )
        self.open_button.setMenu(self.open_menu)
        self.open_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.unload_button = QPushButton("Unload")
        self.unload_button.setToolTip("Stop the inference worker and give its memory back")
        self.unload_button.setEnabled(False)
        self.unload_button.clicked.connect(self.unload_requested.emit)
        self.graft_button = QPushButton()
        self.graft_button.setObjectName("graftButton")
        self.graft_button.clicked.connect(self._on_graft_clicked)
        self.graft_button.hide()

    def _build_labels(self) -> None:
        self.state = QLabel("No model loaded")
        self.state.setObjectName("loadState")
        self.state.setWordWrap(True)  # a long model name wraps instead of widening the window
        self.state.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.memory_label = QLabel()
        self.memory_label.setObjectName("muted")
        self.memory_label.setToolTip("Memory the inference worker holds now (resident set)")
        self.busy = QProgressBar()
        self.busy.setRange(0, 0)
        self.busy.setMaximumWidth(80)
        self.busy.setTextVisible(False)
        self.busy.hide()
        self.info = QLabel()
        self.info.setObjectName("modelInfo")
        self.info.setWordWrap(True)
        self.info.setTextFormat(Qt.TextFormat.RichText)
        self.info.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.info.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.projector_row = ProjectorRow()
        self.backend = QLabel(self._accelerator_text)
        self.backend.setObjectName("backendIndicator")
        self.backend.setWordWrap(True)
        self.backend.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.backend.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)

    def _lay_out(self) -> None:
        top = QHBoxLayout()
        top.setSpacing(6)
        top.addWidget(self.conversations_toggle)
        top.addWidget(self.picker, 1)
        top.addWidget(self.open_button)
        top.addWidget(self.unload_button)
        top.addWidget(self.settings_toggle)
        status = QHBoxLayout()
        status.setSpacing(8)
        status.addWidget(self.state, 1)
        status.addWidget(self.busy)
        status.addWidget(self.projector_row)
        status.addWidget(self.memory_label)
        layout = QGridLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        layout.setVerticalSpacing(3)
        layout.addLayout(top, 0, 0)
        layout.addLayout(status, 1, 0)
        layout.addWidget(self.info, 2, 0)
        layout.addWidget(self.graft_button, 3, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.backend, 4, 0)

    @property
    def models(self) -> list[ModelDescription]:
        return list(self._models)

    @property
    def connections(self) -> list[Connection]:
        return list(self._connections)

    def current(self) -> ModelDescription | None:
        index = self.picker.currentIndex()
        return self._models[index] if 0 <= index < len(self._models) else None

    def set_connections(self, connections: list[Connection], remote: Connection | None) -> None:
        """List ``connections`` after the models; ``remote`` (if any) is the one in use."""
        self._connections = list(connections)
        self._remote = remote
        self.set_models(self._models, None if remote is not None else self._shown)

    def set_models(self, models: list[ModelDescription], selected: ModelDescription | None) -> None:
        """Fill the picker and select ``selected`` (by path) without emitting ``model_chosen``."""
        self._models = list(models)
        self.picker.blockSignals(True)
        try:
            self._fill_picker()
            paths = [model.path for model in models]
            names = [connection.name for connection in self._connections]
            if selected is not None and selected.path in paths:
                self._remote = None
                self.picker.setCurrentIndex(paths.index(selected.path))
            elif self._remote is not None and self._remote.name in names:
                self.picker.setCurrentIndex(len(models) + names.index(self._remote.name))
            else:
                self.picker.setCurrentIndex(-1)
        finally:
            self.picker.blockSignals(False)
        if not models:
            self.picker.setPlaceholderText("No model found: open a GGUF file")
        if self._remote is None:
            self.show_details(self.current())

    def _fill_picker(self) -> None:
        self.picker.clear()
        for model in self._models:
            self.picker.addItem(item_text(model))
            self.picker.setItemData(
                self.picker.count() - 1,
                in_window_words(model.problem or model.runnable_reason or str(model.path)),
                Qt.ItemDataRole.ToolTipRole,
            )
        for connection in self._connections:
            self.picker.addItem(f"Remote: {connection.name}")
            self.picker.setItemData(
                self.picker.count() - 1,
                f"{connection.url} · key {connection.masked_key}",
                Qt.ItemDataRole.ToolTipRole,
            )
        self.picker.addItem(CONNECT_ITEM)

    def show_details(self, model: ModelDescription | None) -> None:
        if model is None:
            self.info.setText("Choose a model, or open a GGUF file or a model folder.")
        else:
            self.info.setText(describe_html(model, self._memory, self._load_options))
        if model is not self._shown:
            self._drafting_stopped = None  # a verdict on one model's drafts
        self._shown = model
        self._update_graft_button()
        self._show_backend(model)

    def set_load_options(self, options: LoadOptions) -> None:
        """Estimate memory for ``options`` from now on (the shown model's line is redone)."""
        self._load_options = options
        if self._remote is None and self._shown is not None:
            self.show_details(self._shown)

    def set_grafting(self, grafting: bool) -> None:
        """While a graft runs its button cancels it; afterwards it offers the graft again."""
        self._grafting = grafting
        self._update_graft_button()

    def set_graft_progress(self, percent: int) -> None:
        if self._grafting:
            self.graft_button.setText(f"Cancel adding the MTP head ({percent} %)")

    def _update_graft_button(self) -> None:
        model = self._shown
        if self._grafting:
            self.graft_button.setText("Cancel adding the MTP head")
            self.graft_button.setToolTip("")
            self.graft_button.show()
        elif can_offer_graft(model):
            assert model is not None and model.sidecar is not None
            self.graft_button.setText(f"Add the MTP head from {sidecar_label(model.sidecar)}…")
            self.graft_button.setToolTip(
                f"Writes a copy of {model.name} with the MTP head of {model.sidecar} added, "
                "so llama.cpp can draft with it (a job: progress and cancel on the Jobs page)"
            )
            self.graft_button.show()
        else:
            self.graft_button.hide()

    def _on_graft_clicked(self) -> None:
        if self._grafting:
            self.graft_cancel_requested.emit()
        elif can_offer_graft(self._shown):
            self.graft_requested.emit(self._shown)

    def _show_backend(self, model: ModelDescription | None) -> None:
        """MLX models: which backend and why; GGUF models: llama.cpp's accelerator report."""
        choice = model.backend if model is not None else None
        if choice is not None and choice.name == MLX:
            self.backend.setText(
                f"<b>Backend:</b> {html.escape(choice.name)} — "
                f"{html.escape(in_window_words(choice.reason))}"
            )
            self.backend.setToolTip("")
        else:
            text = self._accelerator_text
            if self._drafting_stopped is not None:
                stopped = html.escape(self._drafting_stopped)
                text += f"<br><span style='color:{tone_color('warning')}'>{stopped}</span>"
            self.backend.setText(text)
            self.backend.setToolTip(self._accelerator_tooltip)

    def set_drafting_stopped(self, reason: str) -> None:
        """Drafting was stopped for the loaded model on this backend: the backend line says
        why until another model is shown."""
        self._drafting_stopped = reason
        if self._remote is None:
            self._show_backend(self.current())

    def set_load_state(self, text: str, *, busy: bool = False, error: bool = False) -> None:
        self.busy.setVisible(busy)
        self.state.setStyleSheet(tone_style("error") if error else "")
        self.state.setText(text)

    def set_unloadable(self, loaded: bool) -> None:
        """Unload is offered while a local model is loading or loaded."""
        self.unload_button.setEnabled(loaded)
        if not loaded:
            self.memory_label.clear()

    def set_memory_in_use(self, resident_bytes: int | None) -> None:
        """The inference worker's resident memory (None: no worker runs)."""
        in_use = f"RAM in use: {format_bytes(resident_bytes)}" if resident_bytes else ""
        self.memory_label.setText(in_use)

    def set_accelerator(self, report: AcceleratorReport | None, problem: str | None = None) -> None:
        if report is None:
            self._accelerator_text = f"Backend: unknown — {html.escape(problem or '')}"
            self._accelerator_tooltip = ""
        else:
            text = f"<b>Backend:</b> {html.escape(report.summary)}"
            tooltip = [report.system_info]
            if report.reason is not None and report.best != report.running:
                text += (  # a better accelerator is not used: say why where it shows
                    f" — <span style='color:{tone_color('warning')}'>"
                    f"{html.escape(report.reason)}</span>"
                )
            elif report.reason is not None:
                tooltip.insert(0, report.reason)
            self._accelerator_text = text
            self._accelerator_tooltip = "\n\n".join(tooltip)
        if self._remote is None:
            self._show_backend(self.current())

    def show_remote(self, connection: Connection, model: str | None) -> None:
        """The info and backend lines for a server connection (its key only masked)."""
        self._remote = connection
        self._shown = None
        self._update_graft_button()
        self.projector_row.hide()  # the server reads pictures with its own projector, or not
        self.info.setText(
            f"Remote server {html.escape(connection.name)} · model "
            f"{html.escape(model or connection.model or 'the server’s first')} · key "
            f"{html.escape(connection.masked_key)}"
        )
        self.backend.setText(f"<b>Backend:</b> remote: {html.escape(connection.url)}")
        self.backend.setToolTip("The server runs the model; its MTP settings are its own")

    def _on_activated(self, index: int) -> None:
        remote_index = index - len(self._models)
        if 0 <= index < len(self._models):
            self._remote = None
            self.show_details(self._models[index])
            self.model_chosen.emit(self._models[index])
        elif 0 <= remote_index < len(self._connections):
            self.remote_chosen.emit(self._connections[remote_index])
        elif remote_index == len(self._connections):
            self.set_models(self._models, None if self._remote is not None else self._shown)
            self.connect_requested.emit()
