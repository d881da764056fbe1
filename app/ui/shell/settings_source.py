"""The app's settings, held once and announced when they change, so every page uses the saved ones.

Why one source: pages used to take a copy of the settings when they were built, so a Hub endpoint
saved in Settings reached the status bar but not Discover, which still searched the old Hub until
the app restarted. Now every page reads :attr:`SettingsSource.current` when it acts (never a copy
it made earlier), and pages that show something derived from the settings (the sidecar status,
the chat's memory estimate, the models list) listen to :attr:`SettingsSource.changed`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.engine.errors import MtpStudioError
from app.engine.settings import Settings, SettingsStore


class SettingsSource(QObject):
    """The saved :class:`Settings`; ``changed(settings)`` after every save."""

    changed = Signal(object)

    def __init__(self, store: SettingsStore, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.problem: MtpStudioError | None = None
        """Why the settings file could not be read (the defaults are used meanwhile)."""
        try:
            self._current = store.load()
        except MtpStudioError as exc:
            self._current, self.problem = Settings(), exc

    @property
    def current(self) -> Settings:
        return self._current

    def save(self, settings: Settings) -> None:
        """Write ``settings`` (raises :class:`MtpStudioError` naming the bad field), then
        announce them."""
        self.store.save(settings)
        self.adopt(settings)

    def update(self, **changes: Any) -> None:
        """Save the current settings with ``changes``."""
        self.save(replace(self._current, **changes))

    def adopt(self, settings: Settings) -> None:
        """``settings`` were saved (by the settings dialog): use and announce them."""
        self._current = settings
        self.changed.emit(settings)
