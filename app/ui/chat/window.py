"""The chat window: pick a model, talk to it, and see what MTP does for every reply.

Layout: the model bar on top (picker, model facts, load state, pictures line, backend
indicator); below it the conversations list, the transcript with the banner and the composer,
and the settings panel side by side. Pictures dropped anywhere on the window are attached to the
next message (:mod:`~app.ui.chat.controls.attachment_control`).

The window only lays these out and hands the work to one object each: the local model
(:mod:`~app.ui.chat.controls.model_choice`), the servers
(:mod:`~app.ui.chat.controls.remote_connections`), the conversations
(:mod:`~app.ui.chat.controls.conversation_control`) and the replies
(:mod:`~app.ui.chat.controls.reply_control`); which model or server answers is their shared
:class:`~app.ui.chat.bridges.reply_target.ReplyTarget`. Conversations live in the
:class:`HistoryStore` (each reply is written there while it streams, by the bridge thread);
inference runs in the runtime's worker process behind the :class:`RuntimeBridge`; model discovery
and the backend probe run in background threads. Nothing here waits, so the window stays responsive
while a model loads and while tokens stream. A load failure or a worker crash is shown as the
runtime's readable message (cause and fix) in the banner beside the conversation, which stays
intact; the next message starts a fresh worker.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import (
    QAction,
    QCloseEvent,
    QDragEnterEvent,
    QDropEvent,
    QKeySequence,
    QResizeEvent,
    QShowEvent,
)
from PySide6.QtWidgets import QHBoxLayout, QMainWindow, QScrollArea, QVBoxLayout, QWidget

from app.engine.chat.connections import CONNECTIONS_FILE_NAME, ConnectionStore
from app.engine.chat.conversation import context_in_use
from app.engine.chat.history import HISTORY_FILE_NAME
from app.engine.chat.model_files import ModelDescription
from app.engine.runtime.core.demo_model import MODELS_DIR
from app.engine.settings import AppDirs, Settings
from app.ui.chat.bridges.remote_bridge import RemoteBridge
from app.ui.chat.bridges.reply_target import ReplyTarget
from app.ui.chat.bridges.runtime_bridge import RuntimeBridge
from app.ui.chat.controls.attachment_control import AttachmentControl
from app.ui.chat.controls.compare_dialog import CompareDialog
from app.ui.chat.controls.conversation_control import ConversationControl
from app.ui.chat.controls.convert_action import ConvertAction
from app.ui.chat.controls.graft_action import GraftAction
from app.ui.chat.controls.model_choice import ModelChoice
from app.ui.chat.controls.preset_control import PresetControl
from app.ui.chat.controls.remote_connections import RemoteConnections
from app.ui.chat.controls.remote_controls import RemoteControls
from app.ui.chat.controls.reply_control import ReplyControl
from app.ui.chat.transcript.column import TranscriptView
from app.ui.chat.widgets.backend_probe import show_backend
from app.ui.chat.widgets.banner import Banner
from app.ui.chat.widgets.composer import Composer
from app.ui.chat.widgets.connect_dialog import ConnectDialog
from app.ui.chat.widgets.context_meter import ContextMeter
from app.ui.chat.widgets.conversation_list import ConversationList
from app.ui.chat.widgets.model_bar import ModelBar
from app.ui.chat.widgets.picture_offer import picture_offer
from app.ui.chat.widgets.settings_panel import SettingsPanel
from app.ui.chat.widgets.side_panels import ChatSplitter, SidePanels
from app.ui.chat.widgets.template_dialog import show_template
from app.ui.jobs.runner import JobRunner
from app.ui.stores import open_history, open_job_store


class ChatWindow(QMainWindow):
    def __init__(
        self,
        dirs: AppDirs,
        settings: Settings,
        parent: QWidget | None = None,
        *,
        demo_dir: Path = MODELS_DIR,
        jobs: JobRunner | None = None,
        embedded: bool = False,
    ) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        if embedded:  # the main window's Chat page (QMainWindow always starts as a window)
            self.setWindowFlags(Qt.WindowType.Widget)
        self.setObjectName("chatWindow")
        self.setAcceptDrops(True)  # pictures dropped anywhere go with the next message
        self.resize(1360, 860)
        self.store, history_problem = open_history(dirs.data / HISTORY_FILE_NAME)
        self.bridge = RuntimeBridge()
        self.remote_bridge = RemoteBridge()
        self.connection_store = ConnectionStore(dirs.config / CONNECTIONS_FILE_NAME)
        self._closed = False
        self._started = False
        self._own_jobs = jobs is None
        self.jobs = jobs if jobs is not None else JobRunner(open_job_store(dirs)[0], self)
        self.graft = GraftAction(self.jobs, dirs.grafted_models, self)
        self.convert = ConvertAction(self.jobs, dirs.converted_models, self)

        self.model_bar = ModelBar()
        self.conversations = ConversationList()
        self.transcript = TranscriptView()
        self.banner = Banner()
        self.composer = Composer(self.transcript.thumbnails)
        self.context_meter = ContextMeter()
        self.settings_panel = SettingsPanel()
        self.remote_controls = RemoteControls(self.settings_panel, self.composer)
        self._lay_out()
        self.target = ReplyTarget()
        self._build_controls(dirs, settings, demo_dir)
        self._connect()
        self._add_shortcuts(embedded)

        recent = self.store.conversations()
        if recent:
            self.open_conversation(recent[0].id)
        else:
            self.conversation_control.show(None)
        if not embedded:
            self._start()
        if history_problem is not None:
            self.banner.show_text(history_problem)

    def _build_controls(self, dirs: AppDirs, settings: Settings, demo_dir: Path) -> None:
        """One object per job: the local model, the servers, the conversations, the replies,
        the prompt presets."""
        closed = self._is_closed
        shared = {"target": self.target, "bar": self.model_bar, "banner": self.banner}
        self.model_choice = ModelChoice(
            self,
            dirs=dirs,
            settings=settings,
            demo_dir=demo_dir,
            store=self.store,
            bridge=self.bridge,
            transcript=self.transcript,
            panel=self.settings_panel,
            remote_controls=self.remote_controls,
            graft=self.graft,
            convert=self.convert,
            is_closed=closed,
            **shared,
        )
        self.remote_connections = RemoteConnections(
            self,
            store=self.connection_store,
            bridge=self.bridge,
            remote_bridge=self.remote_bridge,
            transcript=self.transcript,
            remote_controls=self.remote_controls,
            is_closed=closed,
            **shared,
        )
        self.conversation_control = ConversationControl(
            self,
            store=self.store,
            conversation_list=self.conversations,
            transcript=self.transcript,
            panel=self.settings_panel,
            composer=self.composer,
        )
        self.replies = ReplyControl(
            self,
            store=self.store,
            target=self.target,
            conversations=self.conversation_control,
            transcript=self.transcript,
            composer=self.composer,
            panel=self.settings_panel,
            banner=self.banner,
            bridge=self.bridge,
            remote_bridge=self.remote_bridge,
            remote_controls=self.remote_controls,
            is_closed=closed,
        )
        self.presets = PresetControl(self, self.store, self.settings_panel)
        self.attachments = AttachmentControl(  # after the model's: it reads what they set
            self,
            composer=self.composer,
            transcript=self.transcript,
            banner=self.banner,
            target=self.target,
            bridge=self.bridge,
            remote_bridge=self.remote_bridge,
        )

    def _connect(self) -> None:
        self.settings_panel.show_template_requested.connect(
            lambda: show_template(self, self.target.model)
        )
        self.replies.drafting_stopped.connect(self.model_bar.set_drafting_stopped)
        self.conversation_control.changed.connect(self.show_context_use)
        self.bridge.loaded.connect(self.show_context_use)  # a bound slot: dropped with the window
        self.settings_panel.changed.connect(self.show_context_use)
        self.context_meter.drop_oldest_requested.connect(
            lambda: self.settings_panel.drop_oldest.setChecked(True)
        )

    def _lay_out(self) -> None:
        middle = QWidget()
        middle_layout = QVBoxLayout(middle)
        middle_layout.setContentsMargins(0, 0, 0, 0)
        middle_layout.addWidget(self.transcript, 1)
        middle_layout.addWidget(self.banner)
        meter_row = QHBoxLayout()
        meter_row.setContentsMargins(12, 4, 12, 0)
        meter_row.addWidget(self.context_meter)
        middle_layout.addLayout(meter_row)
        middle_layout.addWidget(self.composer)
        self.settings_scroll = QScrollArea()
        self.settings_scroll.setWidgetResizable(True)
        self.settings_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.settings_scroll.setWidget(self.settings_panel)
        # as wide as the panel needs, so nothing in it is cut or scrolls sideways
        bar_width = self.settings_scroll.verticalScrollBar().sizeHint().width()
        self.settings_scroll.setMinimumWidth(
            self.settings_panel.minimumSizeHint().width() + bar_width + 4
        )
        self.splitter = ChatSplitter()
        self.splitter.setChildrenCollapsible(False)
        self.splitter.addWidget(self.conversations)
        self.splitter.addWidget(middle)
        self.splitter.addWidget(self.settings_scroll)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([230, 780, self.settings_scroll.minimumWidth()])
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.model_bar)
        layout.addWidget(self.splitter, 1)
        self.setCentralWidget(central)
        self.side_panels = SidePanels(
            self.conversations,
            self.model_bar.conversations_toggle,
            self.settings_scroll,
            self.model_bar.settings_toggle,
        )

    def _add_shortcuts(self, embedded: bool) -> None:
        shortcuts = [
            (
                "Search conversations",
                QKeySequence.StandardKey.Find,
                self.conversations.search.setFocus,
            )
        ]
        if not embedded:  # embedded, the main window's File → New conversation has Ctrl+N
            shortcuts.append(
                ("New conversation", QKeySequence.StandardKey.New, self.new_conversation)
            )
        for text, keys, slot in shortcuts:
            action = QAction(text, self)
            action.setShortcut(QKeySequence(keys))
            # only while the chat has focus: embedded, the main window's pages have their own
            action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            action.triggered.connect(lambda _checked=False, slot=slot: slot())
            self.addAction(action)

    def _start(self) -> None:
        """Look for models (the preferred one then loads) and probe the backend: a window does
        it at once, the main window's Chat page the first time it is shown, so the page can be
        built while the app is idle without starting an inference worker nobody asked for."""
        self._started = True
        self.remote_connections.show_connections()
        self.model_choice.rescan_models()
        show_backend(self.model_bar, lambda: self._closed)

    @property
    def started(self) -> bool:
        """Whether it has looked for models (and so may have started an inference worker)."""
        return self._started

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self.side_panels.fit(event.size().width())

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self._started:
            self._start()

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if picture_offer(event.mimeData()) is not None:
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        offer = picture_offer(event.mimeData())
        if offer is not None:
            event.acceptProposedAction()
            self.attachments.take(offer)

    def show_context_use(self, *_changed: object) -> None:
        """The context meter for the open conversation and the model that answers."""
        conversation = self.conversation_control.current
        info = self.target.info if self.target.remote is None else None
        self.context_meter.show_use(
            context_in_use(conversation.messages) if conversation else None,
            info.context_length if info is not None else None,
            drop_oldest=self.settings_panel.drop_oldest.isChecked(),
        )

    # -- what the main window and the tests drive ---------------------------------------------

    def apply_settings(self, settings: Settings) -> None:
        """Settings were saved: new load options reach the model bar and the loaded model; a
        new models folder is searched (once the chat has looked for models at all)."""
        if self.model_choice.apply_settings(settings) and self._started:
            self.model_choice.rescan_models()

    @property
    def streaming(self) -> bool:
        """Whether a reply is streaming."""
        return self.replies.streaming

    @property
    def loaded_model(self) -> Path | None:
        """The local model loading or loaded in the worker, if any."""
        return self.target.loaded_model

    @property
    def compare_dialog(self) -> CompareDialog | None:
        """The last Compare opened, if any."""
        return self.replies.compare_dialog

    def open_model(self, path: Path) -> ModelDescription:
        """Describe, remember and load the GGUF file or model folder at ``path``."""
        return self.model_choice.open_model(path)

    def use_demo_model(self) -> None:
        """Load the bundled demo model (what "Chat with the demo model" means)."""
        self.model_choice.use_demo_model()

    def show_for_repo(self, repo_id: str, sidecar_repo: str | None = None) -> None:
        """Open the chat on the downloaded model of a catalog entry (or say it is missing)."""
        self.model_choice.want_repo(repo_id, sidecar_repo)  # before a first show scans
        if self.isWindow():
            self.show()
            self.raise_()
            self.activateWindow()
        self.model_choice.choose_repo(repo_id)

    def ask_connect(self) -> ConnectDialog:
        """Open “Connect to a server…” (add, use or remove saved connections)."""
        return self.remote_connections.ask_connect()

    def open_conversation(self, conversation_id: int) -> None:
        self.conversation_control.open_conversation(conversation_id)

    def new_conversation(self) -> None:
        self.conversation_control.new_conversation()

    def rename(self, conversation_id: int, title: str) -> None:
        self.conversation_control.rename(conversation_id, title)

    def delete_conversation(self, conversation_id: int) -> None:
        self.conversation_control.delete_conversation(conversation_id)

    def export_to(self, conversation_id: int, path: Path) -> Path | None:
        """Export a conversation as it is stored (Markdown, or JSON for a .json name)."""
        return self.conversation_control.export_to(conversation_id, path)

    def open_compare(self, prompt: str) -> CompareDialog | None:
        """Run ``prompt`` (or, when empty, the last user message) plain and with MTP."""
        return self.replies.open_compare(prompt)

    # -- closing ------------------------------------------------------------------------------

    def _is_closed(self) -> bool:
        return self._closed

    @property
    def closed(self) -> bool:
        """True once the window was closed: its worker and history are being shut down."""
        return self._closed

    @property
    def shut_down(self) -> bool:
        """True once the worker is stopped and the history closed (after :attr:`closed`)."""
        return self._closed and not self.bridge.running and not self.remote_bridge.running

    def closeEvent(self, event: QCloseEvent) -> None:
        self.shutdown()
        event.accept()

    def shutdown(self) -> None:
        """Stop the reply (its text is saved), close the worker, then the history; never waits."""
        if self._closed:
            return
        self._closed = True
        if self.replies.compare_dialog is not None:
            self.replies.compare_dialog.close()
        if self._own_jobs:
            self.jobs.shutdown()
            self.jobs.store.close()
        self.remote_bridge.shutdown(then=lambda: self.bridge.shutdown(then=self.store.close))
