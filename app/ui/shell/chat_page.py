"""The main window's Chat page: the chat window, built when the app is idle or first asked for.

Building the chat's widgets costs a moment, so it happens shortly after start-up (idle time) or
when something asks for the chat, whichever comes first. Looking for models and starting the
inference worker wait until the page is first shown: a user who only browses the catalog never
pays for them. Saved settings reach the chat as soon as they are saved.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QVBoxLayout, QWidget

from app.engine.catalog import CatalogEntry
from app.engine.settings import AppDirs
from app.ui.chat import ChatWindow
from app.ui.jobs.runner import JobRunner
from app.ui.shell.settings_source import SettingsSource

PREBUILD_DELAY_MS = 400
"""The Chat page's widgets are built this long after start (idle time), so the first click on
Chat does not pay for them; its models scan and inference worker still wait for that click."""


class ChatPage(QWidget):
    """Holds the :class:`ChatWindow` once built; ``built(chat)`` when that happens."""

    def __init__(
        self,
        dirs: AppDirs,
        settings: SettingsSource,
        runner: JobRunner,
        on_built: Callable[[ChatWindow], None],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("chatPage")
        QVBoxLayout(self).setContentsMargins(0, 0, 0, 0)
        self._dirs = dirs
        self._settings = settings
        self._runner = runner
        self._on_built = on_built
        self.chat_window: ChatWindow | None = None
        self._closed = False
        settings.changed.connect(self._apply_settings)
        QTimer.singleShot(PREBUILD_DELAY_MS, self._prebuild)

    def ensure(self) -> ChatWindow:
        """The chat window, built now if it was not yet."""
        if self.chat_window is None:
            self.chat_window = ChatWindow(
                self._dirs, self._settings.current, self, jobs=self._runner, embedded=True
            )
            self.layout().addWidget(self.chat_window)
            self._on_built(self.chat_window)
        return self.chat_window

    def show_entry(self, entry: CatalogEntry) -> ChatWindow:
        """The chat on a catalog entry's downloaded model."""
        chat = self.ensure()
        chat.show_for_repo(entry.hf_repo, entry.mtp_sidecar_repo)
        return chat

    def shutdown(self) -> None:
        self._closed = True
        if self.chat_window is not None:
            self.chat_window.shutdown()

    def _prebuild(self) -> None:
        if not self._closed:
            self.ensure()

    def _apply_settings(self, _settings: object) -> None:
        if self.chat_window is not None:
            self.chat_window.apply_settings(self._settings.current)
