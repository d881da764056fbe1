"""Edit (or add) one catalog entry in a form that validates as you type.

Every keystroke re-runs the engine's own checks for this entry in the context of the whole
catalog (``Catalog.check_candidate``: the entry's rules plus duplicate keys, repos and sidecar
conflicts), and shows each problem under its field. OK stays disabled while there is an error.
Fields the form does not know are carried over untouched, so nothing is lost on save.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QVBoxLayout,
    QWidget,
)

from app.engine.catalog import KNOWN_FIELDS, Catalog, CatalogEntry, Problem, parse_entry
from app.engine.errors import CatalogError
from app.ui.look.tones import tone_color, tone_style

HINTS = {
    "key": "lowercase-kebab, unique, e.g. qwen3-6-27b-mlx-4bit",
    "source_model": "owner/name of the model this entry is built from",
    "quant": "e.g. 4bit, Q4_K_M, fp8",
    "tier": "e.g. small, medium, large",
    "slices": "comma-separated, e.g. full",
    "output_name": "file or folder name of the converted model",
    "hf_repo": "owner/name the converted model is published to",
    "mtp_source_repo": "canonical release with the MTP heads (set with the sidecar repo)",
    "mtp_sidecar_repo": "owner/<base-slug>-mtp (set with the source repo)",
    "drafter_repo": "optional: a separate drafter model, e.g. google/gemma-4-E2B-it-assistant",
    "hf_collection": "optional collection slug owner/slug",
    "public_repos": "optional, comma-separated: other publishers' GGUF / MLX repos of it",
}
LIST_FIELDS = ("slices", "public_repos")


class EntryEditor(QDialog):
    """``replacing`` is the key being edited, or None for a new entry."""

    def __init__(
        self,
        catalog: Catalog,
        fields: Mapping[str, Any],
        replacing: str | None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Edit {replacing}" if replacing else "New catalog entry")
        self.setMinimumWidth(620)
        self._catalog = catalog
        self._replacing = replacing
        self._extra = {k: v for k, v in fields.items() if k not in KNOWN_FIELDS}
        self.edits: dict[str, QLineEdit] = {}
        self.messages: dict[str, QLabel] = {}
        form = QFormLayout()
        for name in KNOWN_FIELDS:
            value = fields.get(name)
            text = ", ".join(value) if isinstance(value, list | tuple) else str(value or "")
            edit = QLineEdit(text)
            edit.setPlaceholderText(HINTS[name])
            edit.textChanged.connect(self.revalidate)
            message = QLabel("")
            message.setWordWrap(True)
            message.setVisible(False)
            holder = QWidget()
            holder_layout = QVBoxLayout(holder)
            holder_layout.setContentsMargins(0, 0, 0, 0)
            holder_layout.setSpacing(2)
            holder_layout.addWidget(edit)
            holder_layout.addWidget(message)
            form.addRow(name, holder)
            self.edits[name] = edit
            self.messages[name] = message
        self.general_message = QLabel("")
        self.general_message.setWordWrap(True)
        if self._extra:
            kept = ", ".join(sorted(self._extra))
            form.addRow("other fields", QLabel(f"{kept} (kept as they are)"))
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.general_message)
        layout.addWidget(self.buttons)
        self.problems: list[Problem] = []
        self.revalidate()

    def current_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        for name, edit in self.edits.items():
            text = edit.text().strip()
            if not text:
                continue
            if name in LIST_FIELDS:
                fields[name] = [part.strip() for part in text.split(",") if part.strip()]
            else:
                fields[name] = text
        fields.update(self._extra)
        return fields

    def revalidate(self) -> None:
        try:
            self.problems = self._catalog.check_candidate(self.current_fields(), self._replacing)
        except CatalogError as exc:
            self.problems = []
            self.general_message.setText(str(exc))
        by_field: dict[str, list[Problem]] = {}
        general: list[Problem] = []
        for problem in self.problems:
            if problem.field in self.edits:
                by_field.setdefault(problem.field, []).append(problem)
            else:
                general.append(problem)
        for name, label in self.messages.items():
            found = by_field.get(name, [])
            label.setText("\n".join(p.message for p in found))
            label.setStyleSheet(
                tone_style("error" if any(p.is_error for p in found) else "warning")
            )
            label.setVisible(bool(found))
            self.edits[name].setStyleSheet(
                f"border: 1px solid {tone_color('error')}" if any(p.is_error for p in found) else ""
            )
        if general:
            self.general_message.setText("\n".join(p.message for p in general))
        elif not any(p.is_error for p in self.problems):
            self.general_message.setText("")
        has_errors = any(p.is_error for p in self.problems)
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(not has_errors)

    def entry(self) -> CatalogEntry:
        """The edited entry (valid: OK is only possible without errors)."""
        return parse_entry(self.current_fields())
