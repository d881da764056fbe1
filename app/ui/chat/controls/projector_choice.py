"""Which vision projector a local model is loaded with: the one beside it, another file, or none.

By default a GGUF model reads pictures with the projector in its folder (the runtime picks it,
docs/vision.md#projectors-in-downloads). The model bar's **Projector** button
(:class:`~app.ui.chat.widgets.projector_row.ProjectorRow`) lets the user name another file or
none (text only: no projector's memory, no pictures); the choice is kept per model in the chat
history's preferences, becomes the model's :class:`LoadSettings` (``projector`` / ``images``),
and reloads the model (``changed``). A chosen file that has gone since falls back to the default.

What the line shows — the projectors in the model's folder with their sizes, and the one loaded
— is read from disk in a background thread.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFileDialog, QWidget

from app.engine.chat.history import HistoryStore
from app.engine.chat.model_files import GGUF, ModelDescription
from app.engine.library.projectors import Projector, projectors_of
from app.engine.runtime.core.backend import LoadSettings, ModelInfo
from app.ui.background import run_in_background
from app.ui.chat.widgets.projector_row import ProjectorRow

PREFERENCE_PREFIX = "projector:"
"""The history store's preference ``projector:<model path>``: a projector's path, or
:data:`TEXT_ONLY`; none: the projector beside the model."""
TEXT_ONLY = "none"
NOT_LOADED = "the model did not load (if its projector is the cause, choose another or none)"


class ProjectorChoice(QObject):
    """The projector choice of each local model, shown on ``row``; ``changed`` when the user
    chose another one for the model shown (it should be loaded again)."""

    changed = Signal()

    def __init__(self, parent: QWidget, store: HistoryStore, row: ProjectorRow) -> None:
        super().__init__(parent)
        self._parent = parent
        self._store = store
        self._row = row
        self._model: ModelDescription | None = None
        row.projector_chosen.connect(self.choose)
        row.other_file_requested.connect(self._ask_file)

    def apply(self, model: ModelDescription, settings: LoadSettings) -> LoadSettings:
        """``settings`` with the user's projector for ``model`` (unchanged: the default)."""
        chosen = self._store.preference(PREFERENCE_PREFIX + str(model.path))
        if chosen == TEXT_ONLY:
            return dataclasses.replace(settings, projector=None, images=False)
        if chosen and Path(chosen).is_file():
            return dataclasses.replace(settings, projector=Path(chosen))
        return settings

    def choose(self, projector: Path | None) -> None:
        """Load the shown model with ``projector`` from now on (None: text only)."""
        model = self._model
        if model is None:
            return
        value = TEXT_ONLY if projector is None else str(projector)
        self._store.set_preference(PREFERENCE_PREFIX + str(model.path), value)
        self.changed.emit()

    def show_loading(self, model: ModelDescription) -> None:
        """``model`` is being loaded: the line waits for it (a model folder has none)."""
        self._model = model
        if model.kind != GGUF:
            self._row.hide()
        else:
            self._row.show_choices((), None, None)

    def show_loaded(self, model: ModelDescription | None, info: ModelInfo | None) -> None:
        """What ``model`` reads pictures with once loaded (``info``; None: the load failed, so
        a broken projector can still be swapped for another or none)."""
        self._model = model
        if model is None:
            self._row.hide()
            return
        reason = info.images_unavailable_reason if info is not None else NOT_LOADED
        loaded = info.projector if info is not None else None

        def facts() -> tuple[tuple[Projector, ...], Projector | None]:
            return projectors_of(model), _projector(loaded) if loaded is not None else None

        def show(found: tuple[tuple[Projector, ...], Projector | None]) -> None:
            if self._model is model:  # not another model chosen meanwhile
                self._row.show_choices(*found, reason, choosable=model.kind == GGUF)

        run_in_background(facts, show, lambda _exc: show(((), None)))

    def _ask_file(self) -> QFileDialog:
        dialog = QFileDialog(
            self._parent,
            "Choose a vision projector",
            str(self._model.path.parent) if self._model is not None else "",
            "Vision projectors (*.gguf)",
        )
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.fileSelected.connect(lambda path: self.choose(Path(path)))
        dialog.open()
        return dialog


def _projector(path: Path) -> Projector:
    try:
        return Projector(path, path.stat().st_size)
    except OSError:
        return Projector(path, 0)
