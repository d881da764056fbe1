"""The settings panel's "Show template": the loaded model's chat template, read-only.

The template decides how the conversation is turned into the prompt the model sees, so when a
model answers oddly it is the first thing to look at; it is shown as the model file carries it.
"""

from __future__ import annotations

from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QPlainTextEdit, QVBoxLayout, QWidget

from app.engine.chat.model_files import ModelDescription

NO_TEMPLATE_TEXT = "This model has no chat template."


def show_template(parent: QWidget, model: ModelDescription | None) -> QDialog:
    """Open a dialog with ``model``'s chat template (or saying it has none)."""
    template = model.chat_template if model is not None else None
    dialog = QDialog(parent)
    dialog.setWindowTitle(f"Chat template of {model.name if model else '—'}")
    text = QPlainTextEdit(template or NO_TEMPLATE_TEXT)
    text.setReadOnly(True)
    text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
    buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
    buttons.rejected.connect(dialog.reject)
    layout = QVBoxLayout(dialog)
    layout.addWidget(text)
    layout.addWidget(buttons)
    dialog.resize(640, 420)
    dialog.open()
    return dialog
