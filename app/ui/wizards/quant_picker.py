"""The download wizard's quantisation picker: a GGUF repo's quantisations with sizes, whether each
fits this machine and how it gets its MTP head, so a user downloads exactly one of them.

Why: a GGUF repo holds many quantisations side by side (hundreds of GB together); without a
picker the wizard offers all files or a glob. The repo is described as search describes it
(:func:`app.engine.hub.search.describe_repo_id`: one ``model_info`` with file sizes, a split file
counted once, the memory estimate for the fit), in a background thread a moment after the repo id
stops changing; a result for a repo id that has since changed is dropped.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QLabel, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget

from app.engine.chat.memory import physical_memory_bytes
from app.engine.hub.fit import FITS
from app.engine.hub.search import GGUF, QuantOption, RepoHit, describe_repo_id
from app.engine.settings import Settings
from app.engine.units import format_bytes
from app.ui.background import run_in_background
from app.ui.errors import readable

LOOKUP_DELAY_MS = 500
COLUMNS = ("Quantisation", "Size", "Fits this machine", "MTP")


class QuantPicker(QWidget):
    """Signals: ``found(bool)`` when the list changes (whether it holds quantisations; the one
    that fits best is then preselected) and ``chosen()`` when the user picks one."""

    found = Signal(bool)
    chosen = Signal()

    def __init__(self, settings: Callable[[], Settings], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._settings = settings
        self._repo_id = ""
        self._asked = ""
        self.options: tuple[QuantOption, ...] = ()
        self.status_label = QLabel()
        self.status_label.setWordWrap(True)
        self.tree = QTreeWidget()
        self.tree.setObjectName("quantPicker")
        self.tree.setHeaderLabels(list(COLUMNS))
        self.tree.setRootIsDecorated(False)
        self.tree.setColumnWidth(0, 160)
        self.tree.setColumnWidth(1, 130)
        self.tree.setColumnWidth(2, 150)
        self.tree.itemSelectionChanged.connect(self.chosen)
        self.tree.hide()
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(LOOKUP_DELAY_MS)
        self._timer.timeout.connect(self._look_up)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.status_label)
        layout.addWidget(self.tree, 1)

    def repo_changed(self, repo_id: str) -> None:
        """Look ``repo_id`` up a moment after it stops changing."""
        self._repo_id = repo_id.strip()
        self._show((), "")
        if self._repo_id.count("/") == 1 and all(self._repo_id.split("/")):
            self._timer.start()
        else:
            self._timer.stop()

    def selected_label(self) -> str:
        items = self.tree.selectedItems()
        return items[0].text(0) if items else ""

    def _look_up(self) -> None:
        repo_id = self._asked = self._repo_id
        settings = self._settings()
        self.status_label.setText(f"Looking up the quantisations of {repo_id}…")
        run_in_background(
            lambda: describe_repo_id(
                repo_id,
                endpoint=settings.endpoint,
                token=None,
                sidecars={},
                memory_bytes=physical_memory_bytes(),
            ),
            self._described,  # bound methods: Qt drops the call if the wizard is gone
            self._failed,
        )

    def _described(self, hit: RepoHit) -> None:
        if hit.repo_id.lower() != self._repo_id.lower():
            return
        if hit.format != GGUF or not hit.quantisations:
            self._show((), "")
            return
        count = len(hit.quantisations)
        self._show(hit.quantisations, f"{hit.repo_id} holds {count} quantisation(s): pick one.")
        fitting = [q for q in hit.quantisations if q.fit.verdict == FITS]
        best = max(fitting, key=lambda q: q.size) if fitting else hit.quantisations[0]
        self.tree.blockSignals(True)  # a preselection, not the user's choice
        self.tree.setCurrentItem(self.tree.topLevelItem(hit.quantisations.index(best)))
        self.tree.blockSignals(False)
        self.found.emit(True)

    def _failed(self, exc: BaseException) -> None:
        if self._asked == self._repo_id:
            self._show((), f"Could not list the quantisations: {readable(exc)}")

    def _show(self, options: tuple[QuantOption, ...], status: str) -> None:
        self.options = options
        self.tree.blockSignals(True)
        self.tree.clear()
        for option in options:
            parts = f" ({len(option.files)} parts)" if len(option.files) > 1 else ""
            QTreeWidgetItem(
                self.tree,
                [
                    option.label,
                    f"{format_bytes(option.size)}{parts}",
                    f"{option.fit.mark} {option.fit.verdict}",
                    option.mtp,
                ],
            )
        self.tree.blockSignals(False)
        self.tree.setVisible(bool(options))
        self.status_label.setText(status)
        if not options:
            self.found.emit(False)
