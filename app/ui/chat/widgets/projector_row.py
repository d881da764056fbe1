"""The model bar's word about pictures: which vision projector the loaded model reads them with,
or that it reads none (and why, as the tooltip), and the **Projector** button to choose another
one or none.

A GGUF model reads pictures through a projector (``mmproj-*.gguf``) loaded beside it; by default
the one in its folder (the one a download fetches, docs/vision.md). Beside the load state it says
"Pictures: mmproj-….gguf (600.6 kB)" once the model is loaded with one, else "Pictures: none"
with the reason in one line as the tooltip ("… has no vision projector …") — short, so the model
bar keeps its height and fits a small window. The button's menu lists the projectors in the
model's folder with their sizes, **No projector (text only)**, and **Another file…**; choosing
one asks for the model to be loaded again with it (``projector_chosen``).
"""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QActionGroup
from PySide6.QtWidgets import QHBoxLayout, QLabel, QMenu, QToolButton, QWidget

from app.engine.library.projectors import Projector
from app.engine.units import format_bytes
from app.ui.look.tones import tone_style
from app.ui.wording import in_window_words

NO_PROJECTOR_TEXT = "No projector (text only)"
OTHER_FILE_TEXT = "Another file…"
NAME_CHARACTERS = 36
"""A longer projector name is shortened in its middle (the tooltip has the whole path)."""


class ProjectorRow(QWidget):
    """``projector_chosen(Path | None)``: load the model with this projector (None: text only);
    ``other_file_requested``: the user wants to pick a projector file."""

    projector_chosen = Signal(object)
    other_file_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.label = QLabel()
        self.label.setObjectName("projectorLine")
        self.label.setTextFormat(Qt.TextFormat.RichText)
        self.menu = QMenu(self)
        self.button = QToolButton()
        self.button.setObjectName("projectorButton")
        self.button.setText("Projector")
        self.button.setToolTip("Choose the vision projector the model reads pictures with, or none")
        self.button.setMenu(self.menu)
        self.button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.label)
        layout.addWidget(self.button)
        self.hide()

    def show_choices(
        self,
        beside: tuple[Projector, ...],
        loaded: Projector | None,
        reason: str | None,
        *,
        choosable: bool = True,
    ) -> None:
        """What the model reads pictures with (``loaded``) or why not (``reason``), and the
        projectors ``beside`` it to choose from (none to choose for an MLX model)."""
        if loaded is not None:
            name = html.escape(_shortened(loaded.name))
            text = f"{name} ({format_bytes(loaded.size_bytes)})"
            tip = f"Pictures are read with the vision projector {loaded.path}"
        elif reason is not None:
            text = f"<span style='{tone_style('muted')}'>none</span>"
            tip = in_window_words(reason)
        else:
            text, tip = "…", ""
        self.label.setText(f"<b>Pictures:</b> {text}")
        self.label.setToolTip(tip)
        self._fill_menu(beside, loaded, text_only=loaded is None and reason is not None)
        self.button.setVisible(choosable)
        self.show()

    def _fill_menu(
        self, beside: tuple[Projector, ...], loaded: Projector | None, *, text_only: bool
    ) -> None:
        self.menu.clear()
        group = QActionGroup(self.menu)
        shown = [*beside]
        if loaded is not None and all(p.path != loaded.path for p in beside):
            shown.append(loaded)  # a file chosen from elsewhere
        for projector in shown:
            action = self._add(
                f"{projector.name} ({format_bytes(projector.size_bytes)})", projector.path
            )
            action.setChecked(loaded is not None and projector.path == loaded.path)
            group.addAction(action)
        none = self._add(NO_PROJECTOR_TEXT, None)
        none.setChecked(text_only)
        group.addAction(none)
        self.menu.addSeparator()
        other = QAction(OTHER_FILE_TEXT, self.menu)
        other.triggered.connect(self.other_file_requested.emit)
        self.menu.addAction(other)

    def _add(self, text: str, path: Path | None) -> QAction:
        action = QAction(text, self.menu)
        action.setCheckable(True)
        action.triggered.connect(lambda _checked=False, path=path: self.projector_chosen.emit(path))
        self.menu.addAction(action)
        return action


def _shortened(name: str) -> str:
    if len(name) <= NAME_CHARACTERS:
        return name
    half = (NAME_CHARACTERS - 1) // 2
    return f"{name[:half]}…{name[-half:]}"
