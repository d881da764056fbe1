""" "Run on a cluster…": launch commands for a catalog entry on vLLM, SGLang and llama-server.

The user enters (or keeps the guess for) the model's size, the weights' precision and each GPU's
memory; the dialog suggests the tensor-parallel size and shows the three commands with Copy
buttons. The commands come from :mod:`app.engine.cluster_launch`.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.engine.cluster_launch import (
    BYTES_PER_PARAMETER,
    launch_commands,
    parameters_from_name,
    suggest_parallelism,
)
from app.ui.catalog.model import EntryNode

DEFAULT_GPU_GIB = 80
DEFAULT_DEPTH = 3
ENGINES = ("vLLM", "SGLang", "llama-server")


class ClusterDialog(QDialog):
    def __init__(self, node: EntryNode, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Run {node.key} on a cluster")
        self.hub_model = node.group.base_model
        output_name = node.text("output_name")
        self.gguf_repo = node.text("hf_repo") if output_name.lower().endswith(".gguf") else None

        guess = parameters_from_name(self.hub_model)
        self.parameters = QDoubleSpinBox()
        self.parameters.setRange(0.1, 100_000)
        self.parameters.setDecimals(1)
        self.parameters.setSuffix(" B parameters")
        self.parameters.setValue(guess if guess is not None else 7.0)
        self.precision = QComboBox()
        self.precision.addItems(list(BYTES_PER_PARAMETER))
        self.gpu_memory = QSpinBox()
        self.gpu_memory.setRange(1, 4096)
        self.gpu_memory.setSuffix(" GiB")
        self.gpu_memory.setValue(DEFAULT_GPU_GIB)
        self.depth = QSpinBox()
        self.depth.setRange(1, 8)
        self.depth.setValue(DEFAULT_DEPTH)
        form = QFormLayout()
        form.addRow("Model", QLabel(self.hub_model))
        size_note = "" if guess is not None else " (not in the name: enter it)"
        form.addRow(f"Size{size_note}", self.parameters)
        form.addRow("Weights", self.precision)
        form.addRow("Memory per GPU", self.gpu_memory)
        form.addRow("MTP draft tokens", self.depth)

        self.suggestion = QLabel()
        self.suggestion.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.suggestion)
        self.command_views: dict[str, QPlainTextEdit] = {}
        self.copy_buttons: dict[str, QPushButton] = {}
        for engine in ENGINES:
            view = QPlainTextEdit()
            view.setReadOnly(True)
            view.setMaximumHeight(70)
            copy = QPushButton("Copy")
            copy.clicked.connect(lambda _checked=False, v=view: self._copy(v))
            row = QHBoxLayout()
            row.addWidget(view, 1)
            row.addWidget(copy)
            layout.addWidget(QLabel(engine))
            layout.addLayout(row)
            self.command_views[engine] = view
            self.copy_buttons[engine] = copy
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        for spin in (self.parameters, self.gpu_memory, self.depth):
            spin.valueChanged.connect(self._update)
        self.precision.currentTextChanged.connect(self._update)
        self.resize(760, 520)
        self._update()

    def _update(self) -> None:
        parallelism = suggest_parallelism(
            self.parameters.value(),
            BYTES_PER_PARAMETER[self.precision.currentText()],
            self.gpu_memory.value(),
        )
        commands = launch_commands(
            self.hub_model, parallelism, self.depth.value(), gguf_repo=self.gguf_repo
        )
        where = (
            f"{parallelism.tensor_parallel} GPU(s) on one machine"
            if parallelism.nodes == 1
            else f"{parallelism.nodes} machines × {parallelism.tensor_parallel} GPUs"
        )
        self.suggestion.setText(
            f"Weights ≈ {parallelism.weights_gib:.0f} GiB; with KV cache ≈ "
            f"{parallelism.needed_gib:.0f} GiB → tensor-parallel {parallelism.tensor_parallel}, "
            f"{where}."
        )
        llama = commands.llama_server or (
            "llama-server runs on one machine only; this model needs several."
            if self.gguf_repo
            else "This entry has no GGUF for llama-server."
        )
        for engine, text in zip(ENGINES, (commands.vllm, commands.sglang, llama), strict=True):
            self.command_views[engine].setPlainText(text)
        self.copy_buttons["llama-server"].setEnabled(commands.llama_server is not None)

    @staticmethod
    def _copy(view: QPlainTextEdit) -> None:
        QGuiApplication.clipboard().setText(view.toPlainText())


class ClusterLaunchButton(QPushButton):
    """The detail pane's "Run on a cluster…" button; ``current`` gives the shown entry."""

    def __init__(self, current: Callable[[], EntryNode | None], parent: QWidget) -> None:
        super().__init__("Run on a cluster…", parent)
        self._current = current
        self.dialog: ClusterDialog | None = None
        self.clicked.connect(self._open)

    def _open(self) -> None:
        node = self._current()
        if node is None:
            return
        self.dialog = ClusterDialog(node, self.window())
        self.dialog.show()
