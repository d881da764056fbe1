"""The settings panel's system-prompt presets: listed from the history, saved and deleted there.

Choosing a preset fills the open conversation's system prompt (the panel does that itself);
Save asks for a name (a window-modal box: the event loop runs on) and Delete removes one of the
user's own presets. See :mod:`app.engine.chat.prompt_presets`.
"""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QInputDialog, QWidget

from app.engine.chat.history import HistoryStore
from app.engine.chat.prompt_presets import PromptPresets
from app.engine.errors import MtpStudioError
from app.ui.chat.widgets.settings_panel import SettingsPanel
from app.ui.errors import show_error


class PresetControl(QObject):
    def __init__(self, window: QWidget, store: HistoryStore, panel: SettingsPanel) -> None:
        super().__init__(window)
        self._window = window
        self._panel = panel
        self.presets = PromptPresets(store)
        self.name_dialog: QInputDialog | None = None
        panel.save_preset_requested.connect(self.ask_name)
        panel.delete_preset_requested.connect(self.delete)
        self.refresh()

    def refresh(self) -> None:
        self._panel.set_presets(
            [(preset.name, preset.text, not preset.shipped) for preset in self.presets.all()]
        )

    def ask_name(self, text: str) -> QInputDialog:
        dialog = QInputDialog(self._window)
        dialog.setWindowTitle("Save as a preset")
        dialog.setLabelText("Name of the preset:")
        dialog.textValueSelected.connect(lambda name: self.save(name, text))
        self.name_dialog = dialog
        dialog.open()
        return dialog

    def save(self, name: str, text: str) -> None:
        try:
            self.presets.save(name, text)
        except MtpStudioError as exc:
            show_error(self._window, "Cannot save the preset", exc)
            return
        self.refresh()

    def delete(self, name: str) -> None:
        self.presets.delete(name)
        self.refresh()
