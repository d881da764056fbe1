"""The conversations of the chat window: which one is open, the list beside it, and what the
list offers — new, search, rename, delete, export.

Everything is read from and written to the :class:`HistoryStore` at once, so what the list and
the transcript show is always what is stored. While a reply streams the open conversation is
locked (:meth:`ConversationControl.set_busy`): the list cannot switch away from it and it cannot
be deleted, since the reply is still being written into it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFileDialog, QInputDialog, QMainWindow, QMessageBox

from app.engine.chat.conversation import ChatSettings, Conversation, StoredMessage, title_from
from app.engine.chat.export import export_conversation
from app.engine.chat.history import HistoryStore
from app.engine.errors import MtpStudioError
from app.engine.runtime.chat_format.prompting import PlacedImage
from app.ui.chat.transcript.column import TranscriptView
from app.ui.chat.widgets.composer import Composer
from app.ui.chat.widgets.conversation_list import ConversationList
from app.ui.chat.widgets.settings_panel import SettingsPanel
from app.ui.errors import show_error

BUSY_TIP = "Stop the reply to switch conversations"
EXPORT_MESSAGE_MS = 8000
PICTURE_TITLE = "A picture"
"""The title of a conversation whose first message is pictures alone."""


class ConversationControl(QObject):
    """Opens, lists, renames, deletes and exports the conversations shown in ``window``;
    ``changed`` after the open conversation (or what is known of it) changed."""

    changed = Signal()

    def __init__(
        self,
        window: QMainWindow,
        *,
        store: HistoryStore,
        conversation_list: ConversationList,
        transcript: TranscriptView,
        panel: SettingsPanel,
        composer: Composer,
    ) -> None:
        super().__init__(window)
        self._window = window
        self._store = store
        self._list = conversation_list
        self._transcript = transcript
        self._panel = panel
        self._composer = composer
        self.current: Conversation | None = None
        self._busy = False

        conversation_list.selected.connect(self.open_conversation)
        conversation_list.new_requested.connect(self.new_conversation)
        conversation_list.rename_requested.connect(self._ask_rename)
        conversation_list.delete_requested.connect(self._ask_delete)
        conversation_list.export_requested.connect(self._ask_export)
        conversation_list.search_changed.connect(lambda _text: self.refresh_list())
        panel.changed.connect(self._settings_changed)

    def set_busy(self, busy: bool) -> None:
        """Lock the open conversation while a reply streams into it."""
        self._busy = busy
        self._list.setEnabled(not busy)
        self._list.setToolTip(BUSY_TIP if busy else "")

    # -- the open conversation ----------------------------------------------------------------

    def open_conversation(self, conversation_id: int) -> None:
        if self._busy:
            return
        try:
            self.show(self._store.conversation(conversation_id))
        except MtpStudioError as exc:
            show_error(self._window, "Cannot open the conversation", exc)
            self.refresh_list()

    def new_conversation(self) -> None:
        if not self._busy:
            self.show(None)
            self._composer.editor.setFocus()

    def show(self, conversation: Conversation | None) -> None:
        """Show ``conversation`` (None: a new, empty one) with its settings."""
        self.current = conversation
        self._transcript.show_messages(conversation.messages if conversation else ())
        if conversation is not None:
            self._panel.set_settings(conversation.settings)
        self._update_title()
        self.refresh_list()
        self.changed.emit()

    def reload(self) -> None:
        """Show the open conversation again as stored (after its messages changed)."""
        if self.current is not None:
            self.show(self._store.conversation(self.current.id))

    def add_user_message(self, text: str, images: Sequence[PlacedImage] = ()) -> StoredMessage:
        """Store ``text`` with ``images`` as the user's next message, in a new conversation
        (titled after it, with the panel's settings) when none is open."""
        if self.current is None:
            title = title_from(text) if text.strip() or not images else PICTURE_TITLE
            conversation_id = self._store.create_conversation(title, self._panel.settings())
        else:
            conversation_id = self.current.id
        message = self._store.add_user_message(conversation_id, text, images)
        self.current = self._store.conversation(conversation_id)
        self._update_title()
        self.refresh_list()
        return message

    def reread(self) -> None:
        """Read the open conversation again (a reply was written into it) and list it anew."""
        if self.current is not None:
            self.current = self._store.conversation(self.current.id)
            self.refresh_list()
            self.changed.emit()

    def refresh_list(self) -> None:
        current = self.current.id if self.current is not None else None
        summaries = self._store.conversations(self._list.search.text())
        self._list.show_conversations(summaries, current)

    def _settings_changed(self, settings: ChatSettings) -> None:
        if self.current is not None:
            self._store.save_settings(self.current.id, settings)

    def _update_title(self) -> None:
        title = self.current.title if self.current else "New conversation"
        self._window.setWindowTitle(f"Chat — {title} — MTP Studio")

    # -- rename, delete, export ---------------------------------------------------------------

    def _ask_rename(self, conversation_id: int) -> None:
        dialog = QInputDialog(self._window)
        dialog.setWindowTitle("Rename conversation")
        dialog.setLabelText("Title:")
        dialog.setTextValue(self._store.conversation(conversation_id).title)
        dialog.textValueSelected.connect(lambda title: self.rename(conversation_id, title))
        dialog.open()

    def rename(self, conversation_id: int, title: str) -> None:
        try:
            self._store.rename(conversation_id, title)
        except MtpStudioError as exc:
            show_error(self._window, "Cannot rename the conversation", exc)
            return
        if self.current is not None and self.current.id == conversation_id:
            self.current = self._store.conversation(conversation_id)
            self._update_title()
        self.refresh_list()

    def _ask_delete(self, conversation_id: int) -> None:
        title = self._store.conversation(conversation_id).title
        box = QMessageBox(
            QMessageBox.Icon.Question,
            "Delete conversation",
            f"Delete “{title}” and all its messages? This cannot be undone; export it first to "
            "keep a copy.",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
            self._window,
        )
        box.accepted.connect(lambda: self.delete_conversation(conversation_id))
        box.open()

    def delete_conversation(self, conversation_id: int) -> None:
        is_open = self.current is not None and self.current.id == conversation_id
        if self._busy and is_open:
            return
        self._store.delete(conversation_id)
        if is_open:
            self.show(None)
        self.refresh_list()

    def _ask_export(self, conversation_id: int, kind: str) -> None:
        conversation = self._store.conversation(conversation_id)
        safe = "".join(c if c.isalnum() or c in "-_ " else "_" for c in conversation.title).strip()
        name = f"{safe or 'conversation'}.{kind}"
        dialog = QFileDialog(self._window, "Export conversation", str(Path.home() / name))
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        dialog.setNameFilter("Markdown (*.md)" if kind == "md" else "JSON (*.json)")
        dialog.setDefaultSuffix(kind)
        # The save dialog asks before it returns an existing file's name, so it may be replaced.
        dialog.fileSelected.connect(
            lambda path: self.export_to(conversation_id, Path(path), replace=True)
        )
        dialog.open()

    def export_to(self, conversation_id: int, path: Path, replace: bool = False) -> Path | None:
        """Export a conversation as it is stored (Markdown, or JSON for a .json name);
        ``replace``: the user confirmed replacing an existing file."""
        try:
            written = export_conversation(
                self._store.conversation(conversation_id), path, replace=replace
            )
        except MtpStudioError as exc:
            show_error(self._window, "Export failed", exc)
            return None
        self._window.statusBar().showMessage(f"Exported to {written}", EXPORT_MESSAGE_MS)
        return written
