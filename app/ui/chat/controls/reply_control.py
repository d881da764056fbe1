"""The replies of the chat window: sending a message, regenerating the last reply, editing a
message and answering it again, paging through versions, stopping a reply, and Compare.

Nothing is thrown away: Regenerate adds a version beside the reply (‹ 2/2 ›), Edit sends the
changed message as a new version beside the original, which keeps what followed it, and "Try MTP
depth 3" on a reply auto ran without drafts answers again at that depth, as another version.

A message carries the pictures waiting above the message box (placed before its text); an edited
one keeps the original's pictures unless the editor's were changed; a regenerated reply is asked
with the same pictures. A model that reads no pictures is not asked about a conversation that
shows some: the banner says why, in one line.

A reply streams from the worker process (or a remote server) through its bridge as a
:class:`ReplyTicket`; the :class:`ReplyRecorder` writes it into the history as it streams, so the
text so far is kept if the reply is stopped, fails, or the app stops. Only one reply streams at
a time: while it does, the conversation is locked and the actions that would start another are
refused. A reply that fails keeps its partial text and says why under it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QMainWindow

from app.engine.chat.attachments import placed_first
from app.engine.chat.conversation import (
    ASSISTANT,
    USER,
    MessageState,
    StoredMessage,
    reply_request,
)
from app.engine.chat.history import HistoryStore
from app.engine.chat.recorder import ReplyRecorder
from app.engine.runtime.chat_format.images import ImagePart
from app.engine.runtime.core.request import GenerationResult
from app.engine.runtime.speculative.draft_health import DRAFTING_STOPPED
from app.ui.chat.bridges.remote_bridge import RemoteBridge
from app.ui.chat.bridges.reply_target import ReplyTarget
from app.ui.chat.bridges.runtime_bridge import ReplyTicket, RuntimeBridge
from app.ui.chat.controls.compare_dialog import CompareDialog
from app.ui.chat.controls.conversation_control import ConversationControl
from app.ui.chat.controls.remote_controls import RemoteControls
from app.ui.chat.transcript.column import TranscriptView
from app.ui.chat.transcript.message_widget import MessageWidget
from app.ui.chat.widgets.banner import Banner
from app.ui.chat.widgets.composer import Composer
from app.ui.chat.widgets.settings_panel import SettingsPanel

NO_MODEL_TEXT = "No model is loaded: choose one in the Model list above, or open a GGUF file."
NOTHING_TO_COMPARE_TEXT = "Type a message to compare plain decoding and MTP on it."
STOPPING_MESSAGE_MS = 3000


class ReplyControl(QObject):
    """Starts, streams, stops and compares the replies of the chat window (``window``)."""

    drafting_stopped = Signal(str)
    """A reply says drafting was stopped on this backend (its drafts were found garbage)."""

    def __init__(
        self,
        window: QMainWindow,
        *,
        store: HistoryStore,
        target: ReplyTarget,
        conversations: ConversationControl,
        transcript: TranscriptView,
        composer: Composer,
        panel: SettingsPanel,
        banner: Banner,
        bridge: RuntimeBridge,
        remote_bridge: RemoteBridge,
        remote_controls: RemoteControls,
        is_closed: Callable[[], bool],
    ) -> None:
        super().__init__(window)
        self._window = window
        self._store = store
        self._target = target
        self._conversations = conversations
        self._transcript = transcript
        self._composer = composer
        self._panel = panel
        self._banner = banner
        self._bridge = bridge
        self._remote_bridge = remote_bridge
        self._remote_controls = remote_controls
        self._is_closed = is_closed
        self.ticket: ReplyTicket | None = None
        self._live: MessageWidget | None = None
        self.compare_dialog: CompareDialog | None = None

        composer.send_requested.connect(self._send_typed)
        composer.stop_requested.connect(self.stop)
        composer.compare_requested.connect(self.open_compare)
        transcript.edit_submitted.connect(self.edit_and_resend)
        transcript.regenerate_requested.connect(self.regenerate)
        transcript.version_chosen.connect(self.choose_version)
        transcript.depth_requested.connect(self.try_depth)

    @property
    def streaming(self) -> bool:
        return self.ticket is not None

    def _send_typed(self, text: str) -> None:
        if self.send(text, self._composer.attachments.pictures()):
            self._composer.clear()

    def send(self, text: str, pictures: Sequence[ImagePart] = ()) -> bool:
        """Add ``text`` with ``pictures`` as the user's message and stream the reply; False
        when refused."""
        if self.streaming or not self._can_generate(text, bool(pictures)):
            return False
        conversation = self._conversations.current
        earlier = conversation.messages if conversation is not None else ()
        if self._pictures_refused(earlier, bool(pictures)):
            return False
        message = self._conversations.add_user_message(text, placed_first(pictures))
        self._transcript.add(USER).show_message(message)
        self._start_reply()
        return True

    def regenerate(self, message_id: int) -> None:
        """Answer the message before reply ``message_id`` again: a new version of the reply."""
        conversation = self._conversations.current
        if self.streaming or conversation is None or not self._can_generate():
            return
        ids = [m.id for m in conversation.messages]
        if message_id not in ids:
            return
        reply = conversation.messages[ids.index(message_id)]
        if reply.parent_id is None:
            return
        if self._pictures_refused(conversation.messages[: ids.index(message_id)], False):
            return
        self._store.answer_again(reply.parent_id)
        self._conversations.reload()
        self._start_reply()

    def edit_and_resend(
        self, message_id: int, text: str, pictures: Sequence[ImagePart] | None = None
    ) -> None:
        """Send ``text`` as a new version of user message ``message_id`` and answer it; the
        original and what followed it stay as the other version. ``pictures``: the new
        version's (None, or the original's unchanged: the original's, where they stood)."""
        conversation = self._conversations.current
        ids = [m.id for m in conversation.messages] if conversation is not None else []
        if self.streaming or conversation is None or message_id not in ids:
            return
        index = ids.index(message_id)
        kept = tuple(placed.image for placed in conversation.messages[index].images)
        if pictures is not None and tuple(pictures) == kept:
            pictures = None
        shown = bool(kept if pictures is None else pictures)
        if not self._can_generate(text, shown):
            return
        if self._pictures_refused(conversation.messages[:index], shown):
            return
        self._store.branch(message_id, text, None if pictures is None else placed_first(pictures))
        self._conversations.reload()
        self._start_reply()

    def choose_version(self, message_id: int) -> None:
        """Show version ``message_id`` of a message, with what followed it."""
        if self.streaming or self._conversations.current is None:
            return
        self._store.choose_version(message_id)
        self._conversations.reload()

    def try_depth(self, message_id: int, depth: int) -> None:
        """Draft ``depth`` tokens per cycle from now on, and answer reply ``message_id``'s
        question again with it."""
        self._panel.use_depth(depth)
        self.regenerate(message_id)

    def stop(self) -> None:
        """Stop the streaming reply; its text so far stays as the reply."""
        if self.ticket is not None:
            self.ticket.cancel()
            self._window.statusBar().showMessage("Stopping…", STOPPING_MESSAGE_MS)

    def _can_generate(self, text: str = "x", pictures: bool = False) -> bool:
        if not text.strip() and not pictures:
            return False
        if not self._target.can_answer:
            self._banner.show_text(
                NO_MODEL_TEXT if self._target.state != "failed" else self._banner.text()
            )
            return False
        return True

    def _pictures_refused(self, earlier: Sequence[StoredMessage], pictures: bool) -> bool:
        """Say why, when the model reads no pictures and the request would carry some: those
        of the ``earlier`` messages, or new ones (``pictures``)."""
        refused = self._target.pictures_refused()
        if refused is not None and (pictures or any(m.images for m in earlier)):
            self._banner.show_text(refused)
            return True
        return False

    def _start_reply(self) -> None:
        conversation = self._conversations.current
        assert conversation is not None
        self._banner.hide()
        request = reply_request(self._panel.settings(), conversation.messages)
        model_name = self._target.reply_model_name()
        message = self._store.start_reply(conversation.id, model_name)
        widget = self._transcript.add(ASSISTANT, model_name)
        widget.begin_stream(message.id)
        ticket = ReplyTicket(request, ReplyRecorder(self._store, message.id))
        ticket.chunk.connect(widget.append)
        ticket.finished.connect(self._on_finished)
        ticket.failed.connect(self._on_failed)
        self.ticket, self._live = ticket, widget
        self._set_streaming(True)
        remote = self._target.remote is not None
        (self._remote_bridge if remote else self._bridge).generate(ticket)

    def _on_finished(self, result: GenerationResult) -> None:
        self._transcript.record_plain_reply(result.stats)
        if self._live is not None:
            self._live.finish(result)
        if result.note is not None and result.note.startswith(DRAFTING_STOPPED):
            self.drafting_stopped.emit(result.note)
        self._end_reply()

    def _on_failed(self, message: str) -> None:
        if self._live is not None:
            self._live.fail(message)
        self._end_reply()
        if self._target.remote is not None and not self._is_closed():
            self._banner.show_text(message)

    def _end_reply(self) -> None:
        self.ticket, self._live = None, None
        self._window.statusBar().clearMessage()
        self._set_streaming(False)
        if self._conversations.current is not None and not self._is_closed():
            self._conversations.reread()
            self._transcript.update_regenerate()
            if self._conversations.current is not None:
                self._transcript.update_versions(self._conversations.current.messages)

    def _set_streaming(self, streaming: bool) -> None:
        self._composer.set_streaming(streaming)
        self._transcript.set_actions_enabled(not streaming)
        self._conversations.set_busy(streaming)
        self._remote_controls.apply()

    def open_compare(self, prompt: str) -> CompareDialog | None:
        """Run ``prompt`` (or, when empty, the last user message) plain and with MTP."""
        if self.streaming or self._target.remote is not None or not self._can_generate("x"):
            return None
        conversation = self._conversations.current
        messages = conversation.messages if conversation else ()
        if prompt:
            context = (*messages, _unsaved_user_message(prompt))
        else:
            last_user = max((i for i, m in enumerate(messages) if m.role == USER), default=None)
            if last_user is None:
                self._banner.show_text(NOTHING_TO_COMPARE_TEXT)
                return None
            context = messages[: last_user + 1]
        if self._pictures_refused(context, False):
            return None
        settings = self._panel.settings()
        self.compare_dialog = CompareDialog(self._bridge, settings, tuple(context), self._window)
        self.compare_dialog.plain_finished.connect(self._transcript.record_plain_reply)
        self.compare_dialog.show()
        self.compare_dialog.start()
        return self.compare_dialog


def _unsaved_user_message(text: str) -> StoredMessage:
    return StoredMessage(0, 0, USER, text, MessageState.COMPLETE, 0.0)
