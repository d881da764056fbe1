"""The chat's side panels (conversations on the left, settings on the right): shown or hidden.

The transcript is what a chat is for, so it keeps the room: a panel shows by itself only while
the chat is wide enough for it beside a transcript of :data:`TRANSCRIPT_ROOM` pixels (at 1024x640
the transcript kept ~270 px when both always showed). A toggle in the model bar shows or hides
each one, and once the user chose, that choice holds whatever the width.

The splitter that holds them asks for no more than the transcript's own minimum width
(:class:`ChatSplitter`): a panel's width must never stop the window from shrinking to a small
screen, since the panels hide themselves there anyway.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QSize
from PySide6.QtWidgets import QAbstractButton, QSplitter, QWidget

TRANSCRIPT_ROOM = 520
"""Pixels the transcript keeps before a side panel shows by itself."""


class ChatSplitter(QSplitter):
    """A splitter whose minimum width is its middle pane's (the transcript's)."""

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        if self.count() < 2:
            return hint
        return QSize(self.widget(1).minimumSizeHint().width(), hint.height())


@dataclass
class _Panel:
    widget: QWidget
    toggle: QAbstractButton
    chosen: bool | None = None

    @property
    def room(self) -> int:
        return max(self.widget.minimumWidth(), self.widget.minimumSizeHint().width())


class SidePanels:
    def __init__(
        self,
        conversations: QWidget,
        conversations_toggle: QAbstractButton,
        settings: QWidget,
        settings_toggle: QAbstractButton,
    ) -> None:
        self.conversations = _Panel(conversations, conversations_toggle)
        self.settings = _Panel(settings, settings_toggle)
        for panel in (self.conversations, self.settings):
            panel.toggle.toggled.connect(lambda on, panel=panel: self._choose(panel, on))

    def fit(self, width: int) -> None:
        """Show what fits a chat ``width`` pixels wide (unless the user chose)."""
        left = self.conversations
        show_left = _wanted(left, width >= left.room + TRANSCRIPT_ROOM)
        used = left.room if show_left else 0
        right = self.settings
        show_right = _wanted(right, width >= used + right.room + TRANSCRIPT_ROOM)
        _show(left, show_left)
        _show(right, show_right)

    def show_settings(self) -> None:
        """Show the settings panel (something in it needs the user's eye)."""
        self._choose(self.settings, True)

    def _choose(self, panel: _Panel, visible: bool) -> None:
        panel.chosen = visible
        _show(panel, visible)


def _wanted(panel: _Panel, fits: bool) -> bool:
    return panel.chosen if panel.chosen is not None else fits


def _show(panel: _Panel, visible: bool) -> None:
    panel.widget.setVisible(visible)
    if panel.toggle.isChecked() != visible:
        panel.toggle.blockSignals(True)
        panel.toggle.setChecked(visible)
        panel.toggle.blockSignals(False)
