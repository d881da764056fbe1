"""The chat window: pick a model, talk to it, and see what MTP does for every reply.

Layout: the model bar on top (picker, model facts, load state, backend indicator); below it the
conversations list, the transcript with the composer, and the settings panel side by side.

The window only orchestrates. Conversations live in the :class:`HistoryStore` (each reply is
written there while it streams, by the bridge thread); inference runs in the runtime's worker
process behind the :class:`RuntimeBridge`; model discovery and the backend probe run in
background threads. Nothing here waits, so the window stays responsive while a model loads and
while tokens stream. A load failure or a worker crash is shown as the runtime's readable message
(cause and fix) beside the conversation, which stays intact; the next message starts a fresh
worker.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QCloseEvent, QFontDatabase, QKeySequence, QShowEvent
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QInputDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QPlainTextEdit,
    QScrollArea,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.engine.chat.accelerator import AcceleratorReport, probe_in_subprocess
from app.engine.chat.connections import CONNECTIONS_FILE_NAME, Connection, ConnectionStore
from app.engine.chat.conversation import (
    ASSISTANT,
    USER,
    ChatSettings,
    Conversation,
    MessageState,
    StoredMessage,
    reply_request,
    title_from,
)
from app.engine.chat.discovery import (
    ModelSources,
    default_model_roots,
    discover_models,
    with_sidecar,
)
from app.engine.chat.export import export_conversation
from app.engine.chat.history import HISTORY_FILE_NAME, HistoryStore
from app.engine.chat.model_files import DEMO, ModelDescription, describe_model
from app.engine.chat.recorder import ReplyRecorder
from app.engine.errors import MtpStudioError
from app.engine.runtime.backend import LoadSettings, ModelInfo
from app.engine.runtime.backends import MLX
from app.engine.runtime.demo_model import DEMO_MODEL_FILENAME, MODELS_DIR
from app.engine.runtime.request import GenerationResult
from app.engine.settings import AppDirs, Settings, SettingsStore, hf_hub_cache
from app.engine.store import JobStore
from app.ui.background import run_in_background
from app.ui.chat.bridge import ReplyTicket, RuntimeBridge
from app.ui.chat.compare_dialog import CompareDialog
from app.ui.chat.composer import Composer
from app.ui.chat.connect_dialog import ConnectDialog
from app.ui.chat.conversation_list import ConversationList
from app.ui.chat.graft_action import GraftAction
from app.ui.chat.message_widget import MessageWidget
from app.ui.chat.model_bar import ModelBar
from app.ui.chat.remote_bridge import RemoteBridge
from app.ui.chat.remote_controls import RemoteControls
from app.ui.chat.settings_panel import SettingsPanel
from app.ui.chat.transcript import TranscriptView
from app.ui.errors import readable, show_error
from app.ui.jobs.runner import JobRunner

log = logging.getLogger(__name__)

LAST_MODEL = "last_model"
_accelerator_report: AcceleratorReport | None = None


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
        self.resize(1360, 860)
        self.store, history_problem = open_history(dirs.data / HISTORY_FILE_NAME)
        self.bridge = RuntimeBridge()
        self.remote_bridge = RemoteBridge()
        self.connection_store = ConnectionStore(dirs.config / CONNECTIONS_FILE_NAME)
        self._remote: Connection | None = None
        self._remote_model = ""
        self.connect_dialog: ConnectDialog | None = None
        self._settings_store = SettingsStore(dirs.settings_file)
        self._app_settings = settings
        self._demo_dir = demo_dir
        self._catalog_sidecars: dict[str, str] = {}
        self._wanted_repo: str | None = None
        self._conversation: Conversation | None = None
        self._model: ModelDescription | None = None
        self._model_info: ModelInfo | None = None
        self._model_state = "none"
        self._ticket: ReplyTicket | None = None
        self._live: MessageWidget | None = None
        self._closed = False
        self.compare_dialog: CompareDialog | None = None
        self._dirs = dirs
        self._own_jobs = jobs is None
        self.jobs = jobs if jobs is not None else JobRunner(_open_job_store(dirs), self)
        self.graft = GraftAction(self.jobs, dirs.grafted_models, self)

        self.model_bar = ModelBar()
        self.conversations = ConversationList()
        self.transcript = TranscriptView()
        self.banner = QLabel()
        self.banner.setObjectName("chatBanner")
        self.banner.setWordWrap(True)
        self.banner.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.banner.setStyleSheet(
            "QLabel { background: rgba(176, 0, 32, 0.08); border: 1px solid rgba(176, 0, 32, 0.4);"
            " border-radius: 4px; padding: 6px; }"
        )
        self.banner.hide()
        self.composer = Composer()
        self.settings_panel = SettingsPanel()
        self.remote_controls = RemoteControls(self.settings_panel, self.composer)

        middle = QWidget()
        middle_layout = QVBoxLayout(middle)
        middle_layout.setContentsMargins(0, 0, 0, 0)
        middle_layout.addWidget(self.transcript, 1)
        middle_layout.addWidget(self.banner)
        middle_layout.addWidget(self.composer)
        settings_scroll = QScrollArea()
        settings_scroll.setWidgetResizable(True)
        settings_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        settings_scroll.setWidget(self.settings_panel)
        settings_scroll.setMinimumWidth(250)  # with the sidebar, the page fits a 1024-px screen
        self.splitter = QSplitter()
        self.splitter.addWidget(self.conversations)
        self.splitter.addWidget(middle)
        self.splitter.addWidget(settings_scroll)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([250, 780, 320])
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.model_bar)
        layout.addWidget(self.splitter, 1)
        self.setCentralWidget(central)

        self._connect()
        self._add_shortcuts()
        recent = self.store.conversations()
        if recent:
            self.open_conversation(recent[0].id)
        else:
            self._show_conversation(None)
        self._started = False
        if not embedded:
            self._start()
        if history_problem is not None:
            self._show_banner(history_problem)

    def _start(self) -> None:
        """Look for models (the preferred one then loads) and probe the backend: a window does
        it at once, the main window's Chat page the first time it is shown, so the page can be
        built while the app is idle without starting an inference worker nobody asked for."""
        self._started = True
        self._show_connections()
        self.rescan_models()
        self._probe_backend()

    @property
    def started(self) -> bool:
        """Whether it has looked for models (and so may have started an inference worker)."""
        return self._started

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self._started:
            self._start()

    # -- wiring -------------------------------------------------------------------------------

    def _connect(self) -> None:
        self.model_bar.model_chosen.connect(self.choose_model)
        self.model_bar.remote_chosen.connect(self.choose_remote)
        self.model_bar.connect_requested.connect(self.ask_connect)
        self.remote_bridge.connected.connect(self._on_remote_connected)
        self.remote_bridge.connect_failed.connect(self._on_remote_failed)
        self.model_bar.open_file_requested.connect(self._ask_model_file)
        self.model_bar.open_folder_requested.connect(self._ask_model_folder)
        self.model_bar.refresh_requested.connect(self.rescan_models)
        self.model_bar.graft_requested.connect(self.graft.ask)
        self.model_bar.graft_cancel_requested.connect(self.graft.cancel)
        self.graft.started.connect(lambda: self.model_bar.set_grafting(True))
        self.graft.progress.connect(self.model_bar.set_graft_progress)
        self.graft.grafted.connect(self._on_grafted)
        self.graft.failed.connect(self._on_graft_failed)
        self.conversations.selected.connect(self.open_conversation)
        self.conversations.new_requested.connect(self.new_conversation)
        self.conversations.rename_requested.connect(self._ask_rename)
        self.conversations.delete_requested.connect(self._ask_delete)
        self.conversations.export_requested.connect(self._ask_export)
        self.conversations.search_changed.connect(lambda _text: self._refresh_list())
        self.composer.send_requested.connect(self._send_typed)
        self.composer.stop_requested.connect(self.stop)
        self.composer.compare_requested.connect(self.open_compare)
        self.settings_panel.changed.connect(self._settings_changed)
        self.settings_panel.show_template_requested.connect(self._show_template)
        self.bridge.loading.connect(self._on_loading)
        self.bridge.loaded.connect(self._on_loaded)
        self.bridge.load_failed.connect(self._on_load_failed)

    def _add_shortcuts(self) -> None:
        for text, keys, slot in (
            ("New conversation", QKeySequence.StandardKey.New, self.new_conversation),
            (
                "Search conversations",
                QKeySequence.StandardKey.Find,
                self.conversations.search.setFocus,
            ),
        ):
            action = QAction(text, self)
            action.setShortcut(QKeySequence(keys))
            # only while the chat has focus: embedded, the main window's pages have their own
            action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            action.triggered.connect(lambda _checked=False, slot=slot: slot())
            self.addAction(action)

    # -- models -------------------------------------------------------------------------------

    def model_sources(self) -> ModelSources:
        """Where to look for models, with the models folder as currently saved in Settings."""
        with contextlib.suppress(MtpStudioError):  # the main window reports a broken file
            self._app_settings = self._settings_store.load()
        roots = (
            *default_model_roots(self._app_settings.models_path(), hf_hub_cache()),
            self._dirs.grafted_models,
        )
        return ModelSources(
            model_roots=roots,
            opened=tuple(self.store.opened_models()),
            demo_dir=self._demo_dir,
            catalog_sidecars=dict(self._catalog_sidecars),
        )

    def rescan_models(self) -> None:
        """Look for models in the background; the picker fills when the scan ends."""
        sources = self.model_sources()
        self.model_bar.set_load_state("Looking for models…", busy=self._model_state != "loading")
        run_in_background(
            lambda: discover_models(sources), self._on_models_found, self._on_scan_failed
        )

    def _on_models_found(self, models: list[ModelDescription]) -> None:
        if self._closed:
            return
        if self._model is not None and all(m.path != self._model.path for m in models):
            models = [*models, self._model]
        selected = None if self._remote else self._model or self._preferred_model(models)
        self.model_bar.set_models(models, selected)
        self._restore_load_state()
        if self._remote is None and self._model is None and selected and selected.runnable:
            self.choose_model(selected)

    def _on_scan_failed(self, exc: BaseException) -> None:
        if not self._closed:
            self._restore_load_state()
            self._show_banner(f"Looking for models failed: {readable(exc)}")

    def _preferred_model(self, models: list[ModelDescription]) -> ModelDescription | None:
        if self._wanted_repo is not None:
            for model in models:
                if model.repo_id == self._wanted_repo and model.runnable:
                    return model
        last = self.store.preference(LAST_MODEL)
        runnable = [model for model in models if model.runnable]
        for model in runnable:
            if str(model.path) == last:
                return model
        return runnable[0] if runnable else None

    def open_model(self, path: Path) -> ModelDescription:
        """Describe, remember and load the GGUF file or model folder at ``path``."""
        description = with_sidecar(describe_model(Path(path)), self.model_sources())
        if description.problem is None:
            self.store.remember_model(description.path)
        models = [m for m in self.model_bar.models if m.path != description.path]
        self.model_bar.set_models([*models, description], description)
        self.choose_model(description)
        return description

    def choose_model(self, model: ModelDescription) -> None:
        """Load ``model`` in the worker (unless it cannot run: then say why)."""
        self.model_bar.show_details(model)
        if not model.runnable:
            self._show_banner(model.problem or model.runnable_reason or "")
            if self._model is not None and self._model_state in ("loading", "ready"):
                self.model_bar.set_models(self.model_bar.models, self._model)  # keep it
            else:
                self.model_bar.set_load_state(f"Cannot load {model.name}", error=True)
            return
        if (
            self._model is not None
            and self._model.path == model.path
            and self._model_state
            in (
                "loading",
                "ready",
            )
        ):
            return
        self._model = model
        self._model_info = None
        self._model_state = "loading"
        self._remote = None
        self.remote_controls.use_local()
        self.store.set_preference(LAST_MODEL, str(model.path))
        self._hide_banner()
        sidecar = model.sidecar if model.backend is not None and model.backend.name == MLX else None
        self.bridge.load(model.path, LoadSettings(), sidecar)

    def show_for_repo(self, repo_id: str, sidecar_repo: str | None = None) -> None:
        """Open the chat on the downloaded model of a catalog entry (or say it is missing)."""
        self._wanted_repo = repo_id
        if sidecar_repo:
            self._catalog_sidecars[repo_id] = sidecar_repo
        if self.isWindow():
            self.show()
            self.raise_()
            self.activateWindow()
        match = next(
            (m for m in self.model_bar.models if m.repo_id == repo_id and m.runnable), None
        )
        if match is not None:
            self.model_bar.set_models(self.model_bar.models, match)
            self.choose_model(match)
        else:
            self._show_banner(
                f"{repo_id} is not downloaded yet (looked in {self._app_settings.models_path()} "
                "and the Hugging Face cache). Download it from the main window (Download model…), "
                "or open a GGUF file here."
            )
            self.rescan_models()

    @property
    def loaded_model(self) -> Path | None:
        """The local model loading or loaded in the worker, if any."""
        if self._model is not None and self._model_state in ("loading", "ready"):
            return self._model.path
        return None

    def use_demo_model(self) -> None:
        """Load the bundled demo model (what "Chat with the demo model" means)."""
        demo = self._demo_dir / DEMO_MODEL_FILENAME
        self._wanted_repo = None
        self.choose_model(with_sidecar(describe_model(demo, DEMO), self.model_sources()))

    def _ask_model_file(self) -> None:
        dialog = QFileDialog(self, "Open a GGUF model", "", "GGUF models (*.gguf);;All files (*)")
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.fileSelected.connect(lambda path: self.open_model(Path(path)))
        dialog.open()

    def _ask_model_folder(self) -> None:
        dialog = QFileDialog(self, "Open a Hugging Face model folder")
        dialog.setFileMode(QFileDialog.FileMode.Directory)
        dialog.setOption(QFileDialog.Option.ShowDirsOnly)
        dialog.fileSelected.connect(lambda path: self.open_model(Path(path)))
        dialog.open()

    def _on_grafted(self, path: Path) -> None:
        self.model_bar.set_grafting(False)
        if not self._closed:
            self.open_model(path)

    def _on_graft_failed(self, message: str) -> None:
        self.model_bar.set_grafting(False)
        if not self._closed:
            self._show_banner(message)

    def _on_loading(self, path: Path) -> None:
        if self._remote is not None:
            return
        self._model_state = "loading"
        self.model_bar.set_load_state(f"Loading {Path(path).name}…", busy=True)
        self.transcript.prepare_code_highlighting()

    def _on_loaded(self, info: ModelInfo) -> None:
        if self._closed or self._remote is not None:
            return
        self._model_info = info
        self._model_state = "ready"
        self.transcript.set_speed_model(
            self._model.name if self._model else "", info.path, info.backend
        )
        self.model_bar.set_load_state(f"Ready: {info.path.name}")
        template = self._model.chat_template if self._model is not None else None
        self.settings_panel.set_model_capabilities(
            info.max_draft_depth, info.mtp_unavailable_reason, template
        )

    def _on_load_failed(self, message: str) -> None:
        if self._closed or self._remote is not None:
            return
        self._model_state = "failed"
        name = self._model.name if self._model is not None else "the model"
        self.model_bar.set_load_state(f"Could not load {name}", error=True)
        self._show_banner(message)

    def _restore_load_state(self) -> None:
        if self._remote is not None:
            self._show_remote_state()
        elif self._model_state == "loading" and self._model is not None:
            self.model_bar.set_load_state(f"Loading {self._model.name}…", busy=True)
        elif self._model_state == "ready" and self._model_info is not None:
            self.model_bar.set_load_state(f"Ready: {self._model_info.path.name}")
        elif self._model_state == "failed":
            self.model_bar.set_load_state("Could not load the model", error=True)
        else:
            self.model_bar.set_load_state("No model loaded")

    # -- remote servers ------------------------------------------------------------------------

    def ask_connect(self) -> ConnectDialog:
        """Open “Connect to a server…” (add, use or remove saved connections)."""
        if self.connect_dialog is None:
            self.connect_dialog = ConnectDialog(self.connection_store, self)
            self.connect_dialog.chosen.connect(self._on_connection_chosen)
            self.connect_dialog.removed.connect(self._on_connection_removed)
        self.connect_dialog.refresh()
        self.connect_dialog.open()
        return self.connect_dialog

    def _show_connections(self) -> None:
        try:
            connections = self.connection_store.load()
        except MtpStudioError as exc:
            connections = []
            self._show_banner(str(exc))
        self.model_bar.set_connections(connections, self._remote)

    def _on_connection_chosen(self, connection: Connection) -> None:
        self._show_connections()
        self.choose_remote(connection)

    def _on_connection_removed(self, name: str) -> None:
        if self._remote is not None and self._remote.name == name:
            self._remote, self._model_state = None, "none"
            self.remote_controls.use_local()
            self.model_bar.set_load_state("No model loaded")
        self._show_connections()

    def choose_remote(self, connection: Connection) -> None:
        """Send replies to ``connection``'s server; it is checked (in the background) first."""
        self.bridge.stop()
        self._remote, self._model, self._model_info = connection, None, None
        self.transcript.set_speed_model("", None, "")
        self._model_state = "loading"
        self._hide_banner()
        self.model_bar.set_connections(self.model_bar.connections, connection)
        self.model_bar.show_remote(connection, None)
        self.remote_controls.use_remote()
        self._show_remote_state()
        self.remote_bridge.use(connection)

    def _on_remote_connected(self, connection: Connection, model: str) -> None:
        if self._closed or self._remote != connection:
            return
        self._model_state = "ready"
        self._remote_model = model
        self.model_bar.show_remote(connection, model)
        self._show_remote_state()

    def _on_remote_failed(self, connection: Connection, message: str) -> None:
        if self._closed or self._remote != connection:
            return
        self._model_state = "failed"
        self._show_remote_state()
        self._show_banner(message)

    def _show_remote_state(self) -> None:
        assert self._remote is not None
        name = self._remote.name
        if self._model_state == "ready":
            self.model_bar.set_load_state(f"Ready: {self._remote_model} on {name}")
        elif self._model_state == "failed":
            self.model_bar.set_load_state(f"Could not connect to {name}", error=True)
        else:
            self.model_bar.set_load_state(f"Connecting to {name}…", busy=True)

    def _probe_backend(self) -> None:
        if _accelerator_report is not None:
            self.model_bar.set_accelerator(_accelerator_report)
            return
        run_in_background(probe_in_subprocess, self._on_backend, self._on_backend_failed)

    def _on_backend(self, report: AcceleratorReport) -> None:
        global _accelerator_report
        _accelerator_report = report
        if not self._closed:
            self.model_bar.set_accelerator(report)

    def _on_backend_failed(self, exc: BaseException) -> None:
        log.error("the backend probe failed", exc_info=(type(exc), exc, exc.__traceback__))
        if not self._closed:
            self.model_bar.set_accelerator(None, "the llama.cpp library could not be queried")

    def _show_template(self) -> None:
        template = self._model.chat_template if self._model is not None else None
        dialog = QDialog(self)
        dialog.setWindowTitle(f"Chat template of {self._model.name if self._model else '—'}")
        text = QPlainTextEdit(template or "This model has no chat template.")
        text.setReadOnly(True)
        text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(dialog.reject)
        layout = QVBoxLayout(dialog)
        layout.addWidget(text)
        layout.addWidget(buttons)
        dialog.resize(640, 420)
        dialog.open()

    # -- conversations ------------------------------------------------------------------------

    def _refresh_list(self) -> None:
        current = self._conversation.id if self._conversation is not None else None
        summaries = self.store.conversations(self.conversations.search.text())
        self.conversations.show_conversations(summaries, current)

    def open_conversation(self, conversation_id: int) -> None:
        if self.streaming:
            return
        try:
            self._show_conversation(self.store.conversation(conversation_id))
        except MtpStudioError as exc:
            show_error(self, "Cannot open the conversation", exc)
            self._refresh_list()

    def new_conversation(self) -> None:
        if not self.streaming:
            self._show_conversation(None)
            self.composer.editor.setFocus()

    def _show_conversation(self, conversation: Conversation | None) -> None:
        self._conversation = conversation
        self.transcript.show_messages(conversation.messages if conversation else ())
        self._connect_message_widgets()
        if conversation is not None:
            self.settings_panel.set_settings(conversation.settings)
        self._update_title()
        self._refresh_list()

    def _connect_message_widgets(self) -> None:
        for widget in self.transcript.messages:
            widget.edit_submitted.connect(self.edit_and_resend)
            widget.regenerate_requested.connect(self.regenerate)

    def _reload_conversation(self) -> None:
        if self._conversation is not None:
            self._show_conversation(self.store.conversation(self._conversation.id))

    def _ask_rename(self, conversation_id: int) -> None:
        dialog = QInputDialog(self)
        dialog.setWindowTitle("Rename conversation")
        dialog.setLabelText("Title:")
        dialog.setTextValue(self.store.conversation(conversation_id).title)
        dialog.textValueSelected.connect(lambda title: self.rename(conversation_id, title))
        dialog.open()

    def rename(self, conversation_id: int, title: str) -> None:
        try:
            self.store.rename(conversation_id, title)
        except MtpStudioError as exc:
            show_error(self, "Cannot rename the conversation", exc)
            return
        if self._conversation is not None and self._conversation.id == conversation_id:
            self._conversation = self.store.conversation(conversation_id)
            self._update_title()
        self._refresh_list()

    def _ask_delete(self, conversation_id: int) -> None:
        title = self.store.conversation(conversation_id).title
        box = QMessageBox(
            QMessageBox.Icon.Question,
            "Delete conversation",
            f"Delete “{title}” and all its messages? This cannot be undone; export it first to "
            "keep a copy.",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
            self,
        )
        box.accepted.connect(lambda: self.delete_conversation(conversation_id))
        box.open()

    def delete_conversation(self, conversation_id: int) -> None:
        if (
            self.streaming
            and self._conversation is not None
            and self._conversation.id == conversation_id
        ):
            return
        self.store.delete(conversation_id)
        if self._conversation is not None and self._conversation.id == conversation_id:
            self._show_conversation(None)
        self._refresh_list()

    def _ask_export(self, conversation_id: int, kind: str) -> None:
        conversation = self.store.conversation(conversation_id)
        safe = "".join(c if c.isalnum() or c in "-_ " else "_" for c in conversation.title).strip()
        name = f"{safe or 'conversation'}.{kind}"
        dialog = QFileDialog(self, "Export conversation", str(Path.home() / name))
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        dialog.setNameFilter("Markdown (*.md)" if kind == "md" else "JSON (*.json)")
        dialog.setDefaultSuffix(kind)
        dialog.fileSelected.connect(lambda path: self.export_to(conversation_id, Path(path)))
        dialog.open()

    def export_to(self, conversation_id: int, path: Path) -> Path | None:
        """Export a conversation as it is stored (Markdown, or JSON for a .json name)."""
        try:
            written = export_conversation(self.store.conversation(conversation_id), path)
        except MtpStudioError as exc:
            show_error(self, "Export failed", exc)
            return None
        self.statusBar().showMessage(f"Exported to {written}", 8000)
        return written

    def _settings_changed(self, settings: ChatSettings) -> None:
        if self._conversation is not None:
            self.store.save_settings(self._conversation.id, settings)

    def _update_title(self) -> None:
        title = self._conversation.title if self._conversation else "New conversation"
        self.setWindowTitle(f"Chat — {title} — MTP Studio")

    # -- replies ------------------------------------------------------------------------------

    @property
    def streaming(self) -> bool:
        return self._ticket is not None

    def _send_typed(self, text: str) -> None:
        if self.send(text):
            self.composer.editor.clear()

    def send(self, text: str) -> bool:
        """Add ``text`` as the user's message and stream the reply; False when refused."""
        if self.streaming or not self._can_generate(text):
            return False
        if self._conversation is None:
            settings = self.settings_panel.settings()
            conversation_id = self.store.create_conversation(title_from(text), settings)
        else:
            conversation_id = self._conversation.id
        message = self.store.add_user_message(conversation_id, text)
        self._conversation = self.store.conversation(conversation_id)
        widget = self.transcript.add(USER)
        widget.show_message(message)
        widget.edit_submitted.connect(self.edit_and_resend)
        self._update_title()
        self._refresh_list()
        self._start_reply()
        return True

    def regenerate(self, message_id: int) -> None:
        """Answer the last user message again (the old reply is replaced)."""
        if self.streaming or self._conversation is None or not self._can_generate():
            return
        self.store.delete_message(message_id)
        self._reload_conversation()
        self._start_reply()

    def edit_and_resend(self, message_id: int, text: str) -> None:
        """Replace a user message, drop what followed it, and answer it again."""
        if self.streaming or self._conversation is None or not self._can_generate(text):
            return
        self.store.edit_message(message_id, text)
        self._reload_conversation()
        self._start_reply()

    def stop(self) -> None:
        """Stop the streaming reply; its text so far stays as the reply."""
        if self._ticket is not None:
            self._ticket.cancel()
            self.statusBar().showMessage("Stopping…", 3000)

    def _can_generate(self, text: str = "x") -> bool:
        if not text.strip():
            return False
        if (self._model is None and self._remote is None) or self._model_state in (
            "none",
            "failed",
        ):
            self._show_banner(
                "No model is loaded: choose one in the Model list above, or open a GGUF file."
                if self._model_state != "failed"
                else self.banner.text()
            )
            return False
        return True

    def _start_reply(self) -> None:
        assert self._conversation is not None
        self._hide_banner()
        conversation = self._conversation
        settings = self.settings_panel.settings()
        request = reply_request(settings, conversation.messages)
        model_name = self._reply_model_name()
        message = self.store.start_reply(conversation.id, model_name)
        widget = self.transcript.add(ASSISTANT, model_name)
        widget.begin_stream(message.id)
        widget.regenerate_requested.connect(self.regenerate)
        ticket = ReplyTicket(request, ReplyRecorder(self.store, message.id))
        ticket.chunk.connect(widget.append)
        ticket.finished.connect(self._on_reply_finished)
        ticket.failed.connect(self._on_reply_failed)
        self._ticket, self._live = ticket, widget
        self._set_streaming(True)
        (self.remote_bridge if self._remote is not None else self.bridge).generate(ticket)

    def _reply_model_name(self) -> str:
        if self._remote is not None:
            model = self._remote_model or self._remote.model or "server model"
            return f"{model} (remote: {self._remote.name})"
        assert self._model is not None
        return self._model.name

    def _on_reply_finished(self, result: GenerationResult) -> None:
        self.transcript.record_plain_reply(result.stats)
        if self._live is not None:
            self._live.finish(result)
        self._end_reply()

    def _on_reply_failed(self, message: str) -> None:
        if self._live is not None:
            self._live.fail(message)
        self._end_reply()
        if self._remote is not None and not self._closed:
            self._show_banner(message)

    def _end_reply(self) -> None:
        self._ticket, self._live = None, None
        self.statusBar().clearMessage()
        self._set_streaming(False)
        if self._conversation is not None and not self._closed:
            self._conversation = self.store.conversation(self._conversation.id)
            self.transcript.update_regenerate()
            self._refresh_list()

    def _set_streaming(self, streaming: bool) -> None:
        self.composer.set_streaming(streaming)
        self.transcript.set_actions_enabled(not streaming)
        self.conversations.setEnabled(not streaming)
        self.conversations.setToolTip("Stop the reply to switch conversations" if streaming else "")
        self.remote_controls.apply()

    def open_compare(self, prompt: str) -> CompareDialog | None:
        """Run ``prompt`` (or, when empty, the last user message) plain and with MTP."""
        if self.streaming or self._remote is not None or not self._can_generate("x"):
            return None
        messages = self._conversation.messages if self._conversation else ()
        if prompt:
            context = (*messages, _unsaved_user_message(prompt))
        else:
            last_user = max((i for i, m in enumerate(messages) if m.role == USER), default=None)
            if last_user is None:
                self._show_banner("Type a message to compare plain decoding and MTP on it.")
                return None
            context = messages[: last_user + 1]
        settings = self.settings_panel.settings()
        self.compare_dialog = CompareDialog(self.bridge, settings, tuple(context), self)
        self.compare_dialog.plain_finished.connect(self.transcript.record_plain_reply)
        self.compare_dialog.show()
        self.compare_dialog.start()
        return self.compare_dialog

    # -- banner, closing ----------------------------------------------------------------------

    def _show_banner(self, text: str) -> None:
        self.banner.setText(text)
        self.banner.setVisible(bool(text))

    def _hide_banner(self) -> None:
        self.banner.hide()

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
        if self.compare_dialog is not None:
            self.compare_dialog.close()
        if self._own_jobs:
            self.jobs.shutdown()
            self.jobs.store.close()
        self.remote_bridge.shutdown(then=lambda: self.bridge.shutdown(then=self.store.close))


def open_history(path: Path) -> tuple[HistoryStore, str | None]:
    """The chat history, or a temporary one (and why) when it cannot be opened."""
    try:
        return HistoryStore(path), None
    except MtpStudioError as exc:
        fallback = Path(tempfile.mkdtemp(prefix="mtp-studio-chat-")) / HISTORY_FILE_NAME
        return HistoryStore(fallback), (
            f"{exc}\nThis session's conversations are kept in {fallback} instead and will not "
            "appear after a restart."
        )


def _open_job_store(dirs: AppDirs) -> JobStore:
    """The job history (shared with the main window), or a temporary one when it cannot open."""
    try:
        dirs.data.mkdir(parents=True, exist_ok=True)
        return JobStore(dirs.job_database)
    except (MtpStudioError, OSError):
        return JobStore(Path(tempfile.mkdtemp(prefix="mtp-studio-jobs-")) / "jobs.sqlite3")


def _unsaved_user_message(text: str) -> StoredMessage:
    return StoredMessage(0, 0, USER, text, MessageState.COMPLETE, 0.0)
