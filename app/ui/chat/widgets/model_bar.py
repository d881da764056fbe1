"""The strip above the conversation: model picker, what the model is, and what runs it.

For the chosen model it shows size, architecture, whether MTP heads are present (or the sidecar
paired with it), and the memory estimate for the load options in Settings (the context chosen
for this machine, the KV cache type, the kept-state budget) with a "fits your machine" hint, redone
when those options change (:meth:`ModelBar.set_load_options`); beside it, the load
state and the backend indicator (CPU / CUDA / Metal, with the reason when a better accelerator
exists but is not used).
"""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QGridLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from app.engine.chat.accelerator import AcceleratorReport
from app.engine.chat.connections import Connection
from app.engine.chat.context_choice import plan_load
from app.engine.chat.memory import fits_text, physical_memory_bytes
from app.engine.chat.model_files import DEMO, DOWNLOADED, GGUF, ModelDescription
from app.engine.load_options import LoadOptions
from app.engine.runtime.backends.choice import MLX
from app.engine.units import format_bytes
from app.ui.look.tones import tone_color, tone_style

ORIGIN_LABELS = {DEMO: "Demo", DOWNLOADED: "Downloaded"}
CONNECT_ITEM = "Connect to a server…"
LLAMA_CPP_SIDECAR_NOTE = (
    "llama.cpp reads MTP heads only from inside the GGUF: add the head from this sidecar to "
    "draft with it"
)


def can_offer_graft(model: ModelDescription | None) -> bool:
    """A readable GGUF without MTP heads, paired with a sidecar: its head can be grafted in."""
    return (
        model is not None
        and model.kind == GGUF
        and model.problem is None
        and model.mtp_blocks == 0
        and model.sidecar is not None
    )


def sidecar_label(sidecar: Path) -> str:
    """``owner/name`` for a sidecar in a Hugging Face cache, else the file's name."""
    for parent in sidecar.parents:
        if parent.name.startswith("models--"):
            return parent.name.removeprefix("models--").replace("--", "/")
    return f"{sidecar.parent.name}/{sidecar.name}"


def item_text(model: ModelDescription) -> str:
    origin = ORIGIN_LABELS.get(model.origin, "Opened")
    where = f"{model.repo_id} · " if model.repo_id else ""
    flag = "" if model.runnable else "  (cannot run)"
    return f"{origin}: {where}{model.name}{flag}"


def describe_html(
    model: ModelDescription, memory_bytes: int | None, options: LoadOptions | None = None
) -> str:
    """The info line for ``model`` (HTML) when loaded with ``options`` (default: the defaults)."""
    if model.problem is not None:
        return f"<span style='{tone_style('error')}'>{html.escape(model.problem)}</span>"
    parts = [html.escape(model.architecture), format_bytes(model.size_bytes)]
    if model.mtp_blocks and model.mtp_note is None:
        parts.append(f"MTP heads: {model.mtp_blocks} block(s) ✓")
    elif model.mtp_blocks:
        parts.append(f"MTP heads: {model.mtp_blocks} block(s), unusable here")
    else:
        parts.append("MTP heads: none")
    plan = plan_load(model, options or LoadOptions(), memory_bytes=memory_bytes)
    memory = plan.memory
    if memory is not None:
        kv = f"{memory.kv_cache_type} " if model.kind == GGUF else ""
        kept = (
            f", kept states ≤ {format_bytes(memory.kept_state_bytes)}"
            if memory.kept_state_bytes
            else ""
        )
        parts.append(
            f"memory ≈ {format_bytes(memory.total_bytes)} (weights "
            f"{format_bytes(memory.weights_bytes)}, {kv}cache {format_bytes(memory.cache_bytes)} "
            f"for {memory.context} tokens, compute {format_bytes(memory.compute_bytes)}{kept}) — "
            f"{fits_text(memory, memory_bytes)}"
        )
        if plan.choice.reason:
            parts.append(f"context: {html.escape(plan.choice.reason, quote=False)}")
    lines = [" · ".join(parts)]
    if plan.kv_note is not None:
        note = f"KV cache f16: {plan.kv_note}"
        lines.append(f"<span style='{tone_style('warning')}'>{html.escape(note)}</span>")
    if model.sidecar is not None:
        note = f" — {LLAMA_CPP_SIDECAR_NOTE}" if model.kind == GGUF else ""
        lines.append(f"Sidecar paired: {html.escape(str(model.sidecar))}{html.escape(note)}")
    elif model.mtp_note is not None and model.runnable:
        lines.append(f"<span style='{tone_style('warning')}'>{html.escape(model.mtp_note)}</span>")
    if model.runnable_reason is not None:
        lines.append(
            f"<span style='{tone_style('warning')}'>{html.escape(model.runnable_reason)}</span>"
        )
    return "<br>".join(lines)


class ModelBar(QWidget):
    """The picker lists local models, then saved server connections (``remote_chosen``), then
    "Connect to a server…" (``connect_requested``)."""

    model_chosen = Signal(object)
    remote_chosen = Signal(object)
    connect_requested = Signal()
    open_file_requested = Signal()
    open_folder_requested = Signal()
    refresh_requested = Signal()
    graft_requested = Signal(object)
    graft_cancel_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._models: list[ModelDescription] = []
        self._connections: list[Connection] = []
        self._remote: Connection | None = None
        self._shown: ModelDescription | None = None
        self._memory = physical_memory_bytes()
        self._load_options = LoadOptions()
        self.picker = QComboBox()
        self.picker.setObjectName("modelPicker")
        self.picker.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.picker.setMinimumContentsLength(24)  # the Chat page fits a 1024-px screen
        self.picker.setPlaceholderText("Looking for models…")
        self.picker.activated.connect(self._on_activated)
        self.open_file_button = QPushButton("Open GGUF…")
        self.open_file_button.clicked.connect(self.open_file_requested.emit)
        self.open_folder_button = QPushButton("Open folder…")
        self.open_folder_button.setToolTip(
            "A Hugging Face-format model folder (config.json + safetensors)"
        )
        self.open_folder_button.clicked.connect(self.open_folder_requested.emit)
        self.refresh_button = QPushButton("Rescan")
        self.refresh_button.setToolTip("Look again for downloaded models")
        self.refresh_button.clicked.connect(self.refresh_requested.emit)
        self.graft_button = QPushButton()
        self.graft_button.setObjectName("graftButton")
        self.graft_button.clicked.connect(self._on_graft_clicked)
        self.graft_button.hide()
        self._grafting = False
        self.info = QLabel()
        self.info.setObjectName("modelInfo")
        self.info.setWordWrap(True)
        self.info.setTextFormat(Qt.TextFormat.RichText)
        self.info.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.info.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.state = QLabel("No model loaded")
        self.state.setObjectName("loadState")
        self.state.setWordWrap(True)  # a long model name wraps instead of widening the window
        self.busy = QProgressBar()
        self.busy.setRange(0, 0)
        self.busy.setMaximumWidth(80)
        self.busy.setMaximumHeight(12)
        self.busy.setTextVisible(False)
        self.busy.hide()
        self._accelerator_text = "Backend: checking…"
        self._drafting_stopped: str | None = None
        self._accelerator_tooltip = ""
        self.backend = QLabel(self._accelerator_text)
        self.backend.setObjectName("backendIndicator")
        self.backend.setWordWrap(True)
        self.backend.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.backend.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)

        layout = QGridLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        layout.setHorizontalSpacing(6)
        layout.addWidget(QLabel("<b>Model</b>"), 0, 0)
        layout.addWidget(self.picker, 0, 1)
        layout.addWidget(self.open_file_button, 0, 2)
        layout.addWidget(self.open_folder_button, 0, 3)
        layout.addWidget(self.refresh_button, 0, 4)
        # The busy bar sits under the load state, not beside it: beside it, showing it while a
        # model loaded widened the window by 84 px past a 1024-px screen, and a window that
        # grows to its minimum width does not shrink back.
        status = QVBoxLayout()
        status.setSpacing(2)
        status.addWidget(self.state)
        status.addWidget(self.busy)
        layout.addLayout(status, 0, 5)
        layout.addWidget(self.info, 1, 1, 1, 5)
        layout.addWidget(self.graft_button, 2, 1, 1, 1, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.backend, 3, 1, 1, 5)
        layout.setColumnStretch(1, 1)
        layout.setColumnStretch(5, 1)

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
            self.picker.clear()
            for model in models:
                self.picker.addItem(item_text(model))
                self.picker.setItemData(
                    self.picker.count() - 1,
                    model.problem or model.runnable_reason or str(model.path),
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
                f"<b>Backend:</b> {html.escape(choice.name)} — {html.escape(choice.reason)}"
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

    def set_accelerator(self, report: AcceleratorReport | None, problem: str | None = None) -> None:
        if report is None:
            self._accelerator_text = f"Backend: unknown — {html.escape(problem or '')}"
            self._accelerator_tooltip = ""
        else:
            text = f"<b>Backend:</b> {html.escape(report.summary)}"
            if report.reason is not None:
                color = tone_color("warning" if report.best != report.running else "muted")
                text += f" — <span style='color:{color}'>{html.escape(report.reason)}</span>"
            self._accelerator_text = text
            self._accelerator_tooltip = report.system_info
        if self._remote is None:
            self._show_backend(self.current())

    def show_remote(self, connection: Connection, model: str | None) -> None:
        """The info and backend lines for a server connection (its key only masked)."""
        self._remote = connection
        self._shown = None
        self._update_graft_button()
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
