"""The main window's look: the theme (system, light, dark), its toggle, and the icons it tints.

The choice is saved in the settings and applied at once; the sidebar's toggle says which look a
click gives. Icons are set once here: they re-tint themselves when the palette changes.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject
from PySide6.QtGui import QActionGroup
from PySide6.QtWidgets import QApplication

from app.ui.icons import icon
from app.ui.look import ThemeManager
from app.ui.shell.sidebar import Sidebar

THEME_CHOICES = (("system", "&System"), ("light", "&Light"), ("dark", "&Dark"))


class LookControl(QObject):
    """Applies and saves the theme choice (``save(choice)``), and keeps the toggle's words."""

    def __init__(
        self,
        choice: str,
        sidebar: Sidebar,
        save: Callable[[str], None],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        app = QApplication.instance()
        assert isinstance(app, QApplication), "the main window needs a QApplication"
        self.themes = ThemeManager(app, choice)
        self.theme_actions: QActionGroup | None = None
        self._sidebar = sidebar
        self._save = save
        sidebar.theme_button.clicked.connect(self.toggle_dark)
        self.themes.changed.connect(self._show_scheme)
        self._show_scheme(self.themes.scheme)

    def set_theme(self, choice: str) -> None:
        """Use ``choice`` (system, light or dark) now and in later runs."""
        self.themes.set_choice(choice)
        if self.theme_actions is not None:
            for action in self.theme_actions.actions():
                action.setChecked(action.data() == choice)
        self._save(choice)

    def toggle_dark(self) -> None:
        self.set_theme("light" if self.themes.scheme == "dark" else "dark")

    def shutdown(self) -> None:
        """Let go of the theme manager (it listens to the OS scheme through the application)."""
        self.themes.release()

    def _show_scheme(self, scheme: str) -> None:
        dark = scheme == "dark"
        button = self._sidebar.theme_button
        button.setText("Light mode" if dark else "Dark mode")
        button.setIcon(icon("sun" if dark else "moon"))
        button.setToolTip("Switch to the light look" if dark else "Switch to the dark look")
