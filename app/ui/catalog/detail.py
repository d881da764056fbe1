"""The detail pane of the selected catalog entry: its fields, repo links, status and actions.

Actions are enabled only when they can work, and a disabled action says why in its tooltip
(e.g. the engine's own "no MTP sidecar configured" message), so nobody clicks into an error.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFormLayout,
    QGridLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app.engine.catalog import KNOWN_FIELDS, is_repo_id
from app.ui.catalog.cluster_dialog import ClusterLaunchButton
from app.ui.catalog.model import EntryNode, sidecar_text
from app.ui.catalog.status import SidecarStatusBook
from app.ui.look.tones import tone_style

REPO_FIELDS = ("source_model", "hf_repo", "mtp_source_repo", "mtp_sidecar_repo")
LABELS = {
    "source_model": "Source model",
    "quant": "Quant",
    "tier": "Tier",
    "slices": "Slices",
    "output_name": "Output name",
    "hf_repo": "Model repo",
    "mtp_source_repo": "MTP source repo",
    "mtp_sidecar_repo": "Sidecar repo",
    "drafter_repo": "Drafter repo",
    "hf_collection": "Collection",
}


def no_sidecar_reason(key: str) -> str:
    return (
        f"no MTP sidecar configured for {key}; add mtp_source_repo and mtp_sidecar_repo to the "
        "catalog entry"
    )


class EntryDetail(QWidget):
    """Shows one :class:`EntryNode`; emits the action signals with the entry's key."""

    publish_requested = Signal(str)
    download_model_requested = Signal(str)
    download_sidecar_requested = Signal(str)
    chat_requested = Signal(str)
    edit_requested = Signal(str)

    def __init__(self, book: SidecarStatusBook, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._book = book
        self._node: EntryNode | None = None
        self._editable_reason = ""

        self.title = QLabel()
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.title.setWordWrap(True)
        self.empty_label = QLabel(
            "Select a model in the catalog to see its repos, its sidecar status and what you "
            "can do with it."
        )
        self.empty_label.setWordWrap(True)
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignTop)
        self.fields_form = QFormLayout()
        self.fields_form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        self.status_label = QLabel()
        self.status_label.setWordWrap(True)
        self.problems_label = QLabel()
        self.problems_label.setWordWrap(True)
        self.problems_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.publish_button = QPushButton("Publish sidecar…")
        self.download_model_button = QPushButton("Download model…")
        self.download_sidecar_button = QPushButton("Download sidecar…")
        self.chat_button = QPushButton("Chat")
        self.edit_button = QPushButton("Edit entry…")
        for button, signal in (
            (self.publish_button, self.publish_requested),
            (self.download_model_button, self.download_model_requested),
            (self.download_sidecar_button, self.download_sidecar_requested),
            (self.chat_button, self.chat_requested),
            (self.edit_button, self.edit_requested),
        ):
            button.clicked.connect(lambda _checked=False, emit=signal.emit: self._emit(emit))
        actions = QGridLayout()
        actions.addWidget(self.publish_button, 0, 0)
        actions.addWidget(self.chat_button, 0, 1)
        actions.addWidget(self.download_model_button, 1, 0)
        actions.addWidget(self.download_sidecar_button, 1, 1)
        actions.addWidget(self.edit_button, 2, 0)
        actions.addWidget(ClusterLaunchButton(lambda: self._node, self), 2, 1)

        self.content = QWidget()
        content_layout = QVBoxLayout(self.content)
        content_layout.addWidget(self.title)
        content_layout.addLayout(self.fields_form)
        content_layout.addWidget(self.status_label)
        content_layout.addWidget(self.problems_label)
        content_layout.addLayout(actions)
        content_layout.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.content)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        # as wide as its buttons need, so a narrow window squeezes the tree (which scrolls)
        # and never cuts the pane's buttons off on the right
        bar = scroll.verticalScrollBar().sizeHint().width()
        self.setMinimumWidth(self.content.minimumSizeHint().width() + bar)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.empty_label)
        layout.addWidget(scroll)
        self._scroll = scroll
        book.changed.connect(self._on_status_changed)
        self.show_entry(None)

    @property
    def key(self) -> str | None:
        return self._node.text("key") if self._node else None

    def show_entry(
        self, node: EntryNode | None, endpoint: str = "", editable_reason: str = ""
    ) -> None:
        """Show ``node``; ``editable_reason`` non-empty means editing is refused, and why."""
        self._node = node
        self._endpoint = endpoint
        self._editable_reason = editable_reason
        self.empty_label.setVisible(node is None)
        self._scroll.setVisible(node is not None)
        if node is None:
            return
        self.title.setText(
            f"<h2 style='margin:0'>{html.escape(node.key)}</h2>"
            f"<span style='{tone_style('muted')}'>{html.escape(node.group.base_model)}</span>"
        )
        while self.fields_form.rowCount():
            self.fields_form.removeRow(0)
        for name in (*KNOWN_FIELDS[1:], *sorted(set(node.row.fields) - set(KNOWN_FIELDS))):
            value = node.text(name)
            if not value:
                continue
            label = QLabel(self._field_html(name, value))
            label.setWordWrap(True)
            label.setOpenExternalLinks(True)
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
            self.fields_form.addRow(LABELS.get(name, name), label)
        if node.row.location.file is not None:
            file_label = QLabel(html.escape(str(node.row.location.file)))
            file_label.setWordWrap(True)
            self.fields_form.addRow("Catalog file", file_label)
        if node.problems:
            lines = "".join(
                f"<li style='{tone_style('error' if p.is_error else 'warning')}'>"
                f"{html.escape(p.field or 'entry')}: {html.escape(p.message)}</li>"
                for p in node.problems
            )
            self.problems_label.setText(f"<b>Problems</b><ul style='margin:0'>{lines}</ul>")
        self.problems_label.setVisible(bool(node.problems))
        self._update_status_and_actions()

    def _field_html(self, name: str, value: str) -> str:
        if name in REPO_FIELDS and is_repo_id(value) and self._endpoint:
            return f"<a href='{self._endpoint}/{value}'>{html.escape(value)}</a>"
        if name == "hf_collection" and self._endpoint:
            return f"<a href='{self._endpoint}/collections/{value}'>{html.escape(value)}</a>"
        return html.escape(value)

    def _on_status_changed(self, repo_id: str) -> None:
        if self._node is not None and self._node.sidecar_repo == repo_id:
            self._update_status_and_actions()

    def _update_status_and_actions(self) -> None:
        node = self._node
        if node is None:
            return
        label, explanation = sidecar_text(node, self._book)
        self.status_label.setText(f"<b>Sidecar:</b> {label} — {html.escape(explanation)}")
        has_errors = bool(node.errors)
        errors_reason = "Fix the entry's problems first (Edit entry…)."
        if not node.has_sidecar:
            publish_reason = no_sidecar_reason(node.key)
        else:
            publish_reason = errors_reason if has_errors else ""
        self._enable(self.publish_button, publish_reason)
        model_reason = "" if is_repo_id(node.text("hf_repo")) else "The entry has no valid hf_repo."
        self._enable(self.download_model_button, model_reason)
        sidecar_reason = "" if node.has_sidecar else no_sidecar_reason(node.key)
        self._enable(self.download_sidecar_button, sidecar_reason)
        self._enable(self.chat_button, errors_reason if has_errors else "")
        self._enable(self.edit_button, self._editable_reason)

    @staticmethod
    def _enable(button: QPushButton, reason: str) -> None:
        button.setEnabled(not reason)
        button.setToolTip(reason)

    def _emit(self, emit: object) -> None:
        if self.key:
            emit(self.key)  # type: ignore[operator]
