"""The main window: one window, a sidebar of pages (Home, Models, Catalog, Chat, Jobs, Server).

It owns the long-lived parts (settings, job store, job runner, sidecar status book) and hands
them to the pages. The chat is a page too, created the first time it is shown (it starts the
inference worker, which a user who only browses the catalog never pays for). Wizards and
dialogs still open on top. What the user arranged (size, page, splitters) is kept between runs
(:mod:`app.ui.shell.window_state`); a first run opens on Home. Other features plug in here:
:meth:`MainWindow.set_chat_handler` enables the detail pane's Chat button and :attr:`runner`
starts any engine job with progress in Jobs.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, QUrl
from PySide6.QtGui import (
    QAction,
    QActionGroup,
    QCloseEvent,
    QDesktopServices,
    QKeySequence,
    QPalette,
)
from PySide6.QtWidgets import (
    QApplication,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMessageBox,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.engine.catalog import CatalogEntry
from app.engine.chat.history import HISTORY_FILE_NAME
from app.engine.chat.model_files import describe_model
from app.engine.credentials import mask_credentials
from app.engine.errors import MtpStudioError
from app.engine.hub.get import GET_KIND, GetJob
from app.engine.hub.search import catalog_sidecars
from app.engine.settings import AppDirs, Settings, SettingsStore, app_dirs, token_status
from app.engine.store import JobSpec, JobState, JobStore
from app.ui.about import about_html
from app.ui.background import run_in_background
from app.ui.catalog.browser import CatalogBrowser
from app.ui.catalog.publish_queue import PublishQueue, missing_sidecars
from app.ui.catalog.status import SidecarStatusBook
from app.ui.chat import ChatWindow
from app.ui.chat.controls.graft_action import GraftAction
from app.ui.chat.window import open_history
from app.ui.errors import readable, show_error
from app.ui.icons import icon
from app.ui.jobs.model import JobTableModel
from app.ui.jobs.monitor import JobMonitor
from app.ui.jobs.runner import JobRunner
from app.ui.library.page import LibraryPage
from app.ui.look import ThemeManager
from app.ui.resources import app_icon
from app.ui.server import ServerPanel
from app.ui.settings_dialog import SettingsDialog, SignInDialog, token_summary
from app.ui.shell.home import HomePage
from app.ui.shell.pages import CATALOG, CHAT, HOME, JOBS, MODELS, PAGES, SERVER
from app.ui.shell.shortcuts import ShortcutsDialog, shortcut_rows
from app.ui.shell.sidebar import Sidebar
from app.ui.shell.window_state import WindowState
from app.ui.wizards.download import DownloadWizard
from app.ui.wizards.publish import PublishWizard

ChatHandler = Callable[[CatalogEntry], None]
WINDOW_STATE_FILE = "window-state.ini"
CHAT_PREBUILD_DELAY_MS = 400
"""The Chat page's widgets are built this long after start (idle time), so the first click on
Chat does not pay for them; its models scan and inference worker still wait for that click."""


class MainWindow(QMainWindow):
    def __init__(self, dirs: AppDirs | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("mainWindow")
        self.dirs = dirs or app_dirs()
        self.settings_store = SettingsStore(self.dirs.settings_file)
        self.settings, settings_problem = self._load_settings()
        self.store, store_problem = self._open_store()
        self.runner = JobRunner(self.store, self)
        self.jobs = JobTableModel(self.runner, self)
        self.status_book = SidecarStatusBook(
            self.dirs.cache / "sidecar-status.json", self.settings.endpoint, self
        )
        self.publish_queue = PublishQueue(self.runner, lambda: self.settings, self)
        self.window_state = WindowState(self.dirs.config / WINDOW_STATE_FILE)
        self.themes = ThemeManager(_application(), self.settings.theme)
        self._chat_handler: ChatHandler | None = None
        self.chat_window: ChatWindow | None = None
        self.shut_down = False
        self.open_wizards: list[QWidget] = []

        self.history, history_problem = open_history(self.dirs.data / HISTORY_FILE_NAME)
        self.graft = GraftAction(self.runner, self.dirs.grafted_models, self)
        self.home = HomePage(self.jobs)
        self.library = LibraryPage(self.dirs, self.settings, self.history, self)
        self.library.model_in_use = lambda: (
            self.chat_window.loaded_model if self.chat_window else None
        )
        self.browser = CatalogBrowser(self.status_book, self)
        self.monitor = JobMonitor(self.runner, self.jobs)
        self.server_panel = ServerPanel(self)
        self.publish_missing_button = QPushButton("Publish every missing sidecar…")
        self.publish_missing_button.setToolTip(
            "One publish job per sidecar the Hub does not have yet, run one after another"
        )
        self.queue_label = QLabel()
        self.queue_label.setObjectName("muted")
        self.cancel_queue_button = QPushButton("Cancel waiting publishes")
        self.cancel_queue_button.hide()
        self.chat_page = QWidget()
        self.chat_page.setObjectName("chatPage")
        QVBoxLayout(self.chat_page).setContentsMargins(0, 0, 0, 0)
        self.page_widgets: dict[str, QWidget] = {
            HOME: self.home,
            MODELS: self.library,
            CATALOG: _page(
                "Catalog",
                "Models known to carry MTP heads, their downloads and their sidecars.",
                self.browser,
                [self.queue_label, self.cancel_queue_button, self.publish_missing_button],
            ),
            CHAT: self.chat_page,
            JOBS: _page(
                "Jobs",
                "Downloads, publishes, grafts and conversions: progress, pause, cancel, history.",
                self.monitor,
            ),
            SERVER: _page(
                "Server",
                "Serve a model with MTP to editors, agents and Claude Code through OpenAI- and "
                "Anthropic-compatible APIs.",
                self.server_panel,
            ),
        }
        self.pages = QStackedWidget()
        for spec in PAGES:
            self.pages.addWidget(self.page_widgets[spec.key])
        self.sidebar = Sidebar()
        central = QWidget()
        layout = QHBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.sidebar)
        layout.addWidget(self.pages, 1)
        self.setCentralWidget(central)

        self.endpoint_label = QLabel()
        self.token_label = QLabel()
        self.jobs_label = QLabel()
        for label in (self.endpoint_label, self.token_label):
            self.statusBar().addWidget(label)
        self.statusBar().addPermanentWidget(self.jobs_label)

        self._build_menus()
        self._add_icons()
        self._connect()
        self.set_chat_handler(self.open_chat)

        if not self.browser.open_saved(self.settings.catalog_files):
            self.browser.open_files([])
        self.resize(1280, 820)
        saved_page = self.window_state.restore(self, self._splitters())
        self.show_page(saved_page if saved_page in self.page_widgets else HOME)
        self._update_status()
        self._update_title()
        self.refresh_home()
        QTimer.singleShot(CHAT_PREBUILD_DELAY_MS, self._prebuild_chat)
        for title, problem in (
            ("Settings could not be read", settings_problem),
            ("Job history could not be opened", store_problem),
            ("Chat history could not be opened", history_problem),
        ):
            if problem is not None:
                show_error(self, title, problem)

    def _connect(self) -> None:
        self.sidebar.page_chosen.connect(self._show_chosen_page)
        self.sidebar.theme_button.clicked.connect(self.toggle_dark)
        self.themes.changed.connect(self._show_scheme)
        self.home.demo_chat_requested.connect(self.chat_with_demo)
        self.home.catalog_requested.connect(lambda: self.show_page(CATALOG))
        self.home.download_requested.connect(lambda: self.open_download_wizard())
        self.home.sign_in_requested.connect(self.open_sign_in)
        self.home.conversation_chosen.connect(self.open_conversation)
        self.home.jobs_requested.connect(lambda: self.show_page(JOBS))
        self.home.models_requested.connect(lambda: self.show_page(MODELS))
        self.library.chat_requested.connect(lambda path: self.open_chat().open_model(path))
        self.library.graft_requested.connect(self.add_head)
        self.library.download_sidecar_requested.connect(
            lambda repo: self.open_download_wizard(repo, ("mtp.safetensors",))
        )
        self.library.get_requested.connect(self._get)
        self.graft.grafted.connect(self._on_grafted)
        self.graft.failed.connect(lambda message: show_error(self, "Add the MTP head", message))
        self.browser.detail.download_model_requested.connect(self.download_model)
        self.browser.detail.download_sidecar_requested.connect(self.download_sidecar)
        self.browser.detail.publish_requested.connect(self.publish_sidecar)
        self.browser.detail.chat_requested.connect(self._chat)
        self.browser.catalog_changed.connect(self._update_title)
        self.browser.catalog_changed.connect(self._tell_library_the_sidecars)
        self.browser.files_changed.connect(self._remember_catalog_files)
        self.publish_missing_button.clicked.connect(self.publish_missing_sidecars)
        self.cancel_queue_button.clicked.connect(self.publish_queue.cancel_waiting)
        self.publish_queue.changed.connect(self._show_queue)
        self.runner.job_started.connect(lambda _job: self._update_status())
        self.runner.job_finished.connect(self._after_job)

    # -- pages --------------------------------------------------------------------------------

    @property
    def current_page(self) -> str:
        return self.sidebar.current_key

    def show_page(self, key: str) -> None:
        """Switch to page ``key`` (the chat is created the first time it is shown)."""
        if self.sidebar.current_key == key:
            self._show_chosen_page(key)
        else:
            self.sidebar.select(key)  # its page_chosen signal shows the page

    def _show_chosen_page(self, key: str) -> None:
        if key == CHAT:
            self._ensure_chat()
        self.pages.setCurrentWidget(self.page_widgets[key])
        if key == HOME:
            self.refresh_home()

    def refresh_home(self) -> None:
        """Recent conversations (read in the background) and the sign-in state."""
        status = token_status()
        self.home.set_account(token_summary(status), status.signed_in)
        run_in_background(
            self.history.conversations,
            self.home.set_conversations,
            lambda exc: self.home.set_conversations_problem(readable(exc)),
        )

    def set_chat_handler(self, handler: ChatHandler) -> None:
        """Enable Chat in the detail pane; ``handler`` gets the selected catalog entry."""
        self._chat_handler = handler
        self.browser.detail.chat_available = True
        self.browser._on_selection()

    # -- actions ------------------------------------------------------------------------------

    def download_model(self, key: str) -> None:
        entry = self._entry(key)
        if entry is None:
            return
        is_gguf = entry.output_name.lower().endswith(".gguf")
        sidecar = entry.mtp_sidecar_repo if is_gguf and entry.mtp_sidecar_repo else ""
        self.open_download_wizard(entry.hf_repo, (), sidecar_repo=sidecar)

    def download_sidecar(self, key: str) -> None:
        entry = self._entry(key)
        if entry is not None and entry.mtp_sidecar_repo:
            self.open_download_wizard(entry.mtp_sidecar_repo, ("mtp.safetensors",))

    def open_download_wizard(
        self, repo_id: str = "", include: tuple[str, ...] = (), *, sidecar_repo: str = ""
    ) -> DownloadWizard:
        """The download wizard; with ``sidecar_repo`` it offers to graft that sidecar's head
        into the GGUFs it downloads."""
        wizard = DownloadWizard(
            self.runner,
            self.jobs,
            self.settings,
            repo_id,
            include,
            self,
            sidecar_repo=sidecar_repo,
            grafted_dir=self.dirs.grafted_models,
        )
        self._keep_open(wizard)
        return wizard

    def publish_sidecar(self, key: str = "") -> PublishWizard:
        wizard = PublishWizard(
            self.runner, self.jobs, self.settings, self.browser.valid_entries(), key, self
        )
        self._keep_open(wizard)
        return wizard

    def open_settings(self) -> SettingsDialog:
        dialog = SettingsDialog(self.settings_store, self.settings, self)
        dialog.saved.connect(self._apply_settings)
        dialog.open()
        return dialog

    def open_sign_in(self) -> SignInDialog:
        dialog = SignInDialog(self.settings.endpoint, self)
        dialog.signed_in.connect(lambda _user: self._update_status())
        dialog.open()
        return dialog

    def open_chat(self, entry: CatalogEntry | None = None) -> ChatWindow:
        """Show the Chat page; for a catalog ``entry``, on its downloaded model."""
        self.show_page(CHAT)
        chat = self._ensure_chat()
        if entry is not None:
            chat.show_for_repo(entry.hf_repo, entry.mtp_sidecar_repo)
        return chat

    def chat_with_demo(self) -> ChatWindow:
        """Show the Chat page on the bundled demo model."""
        chat = self.open_chat()
        chat.use_demo_model()
        return chat

    def open_conversation(self, conversation_id: int) -> ChatWindow:
        chat = self.open_chat()
        chat.open_conversation(conversation_id)
        return chat

    def publish_missing_sidecars(self) -> QMessageBox:
        """Ask (a window-modal box, the event loop runs on), then queue one publish job per
        sidecar the Hub said it lacks."""
        missing = missing_sidecars(self.browser.valid_entries(), self.status_book.status)
        unknown = (
            f"{missing.unknown} sidecar(s) have not been checked on the Hub yet, or it was "
            "unreachable: refresh the sidecar status (F5) to include them."
            if missing.unknown
            else ""
        )
        box = QMessageBox(self)
        box.setWindowTitle("Publish every missing sidecar")
        if not missing.entries:
            box.setText("Every checked sidecar is on the Hub: nothing to publish.")
            box.setInformativeText(unknown)
        elif not token_status().signed_in:
            box.setText("Publishing needs a Hub token with write access: sign in first.")
            box.finished.connect(lambda _result: self.open_sign_in())
        else:
            names = "\n".join(f"• {entry.mtp_sidecar_repo}" for entry in missing.entries)
            box.setIcon(QMessageBox.Icon.Question)
            box.setText(f"Publish {len(missing.entries)} sidecar(s), one after another?")
            box.setInformativeText(f"{names}\n\n{unknown}".strip())
            box.setStandardButtons(QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No)
            box.accepted.connect(lambda: self.publish_queue.enqueue(missing.entries))
        self.publish_missing_box = box
        box.open()
        return box

    def add_head(self, model: Path, sidecar: Path) -> None:
        """Models page → "Add MTP head from sidecar": read the GGUF's header in the background,
        then the graft asks before it writes (a job in Jobs)."""
        run_in_background(
            lambda: replace(describe_model(model), sidecar=sidecar),
            self.graft.ask,
            lambda exc: show_error(self, "Add the MTP head", readable(exc)),
        )

    def _get(self, job: GetJob) -> None:
        """Models page → Discover → Get: one recorded job (download, sidecar, graft)."""
        self.runner.start(JobSpec(GET_KIND, job.plan.title, job.to_params()), job)

    def _on_grafted(self, path: Path) -> None:
        self.library.refresh(select=path)

    def _tell_library_the_sidecars(self) -> None:
        self.library.discover.set_sidecars(catalog_sidecars(self.browser.valid_entries()))
        self.library.set_catalog_sidecars(
            {
                entry.hf_repo: entry.mtp_sidecar_repo
                for entry in self.browser.valid_entries()
                if entry.mtp_sidecar_repo
            }
        )

    def _show_queue(self) -> None:
        self.queue_label.setText(self.publish_queue.summary())
        self.cancel_queue_button.setVisible(self.publish_queue.waiting > 0)

    def _prebuild_chat(self) -> None:
        if not self.shut_down:
            self._ensure_chat()

    def _ensure_chat(self) -> ChatWindow:
        if self.chat_window is None:
            self.chat_window = ChatWindow(
                self.dirs, self.settings, self.chat_page, jobs=self.runner, embedded=True
            )
            self.chat_page.layout().addWidget(self.chat_window)
            self.window_state.restore_splitters({"chat": self.chat_window.splitter})
        return self.chat_window

    def _splitters(self) -> dict[str, QSplitter]:
        # "jobs-stacked": the Jobs page's list now sits above its details; a saved state of
        # the side-by-side splitter would bring its orientation back
        splitters = {"catalog": self.browser.splitter, "jobs-stacked": self.monitor.splitter}
        if self.chat_window is not None:
            splitters["chat"] = self.chat_window.splitter
        return splitters

    def _chat(self, key: str) -> None:
        entry = self._entry(key)
        if entry is not None and self._chat_handler is not None:
            self._chat_handler(entry)

    def _entry(self, key: str) -> CatalogEntry | None:
        try:
            return self.browser.entry(key)
        except MtpStudioError as exc:
            show_error(self, f"Cannot use {key}", exc)
            return None

    def _keep_open(self, window: QWidget) -> None:
        self.open_wizards.append(window)
        window.destroyed.connect(lambda: self.open_wizards.remove(window))
        window.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        window.show()

    # -- menus --------------------------------------------------------------------------------

    def _build_menus(self) -> None:
        catalog_page = self.page_widgets[CATALOG]
        file_menu = self.menuBar().addMenu("&File")
        self._action(file_menu, "&Open catalog…", self._open_catalog, QKeySequence.StandardKey.Open)
        self._action(file_menu, "&Merge catalog…", self._merge_catalog)
        new_catalog = self._action(
            file_menu, "&New catalog…", self._new_catalog, QKeySequence.StandardKey.New
        )
        self._action(
            file_menu, "Use the &bundled catalog only", lambda: self.browser.open_files([])
        )
        save_catalog = self._action(
            file_menu, "&Save catalog", self.browser.save, QKeySequence.StandardKey.Save
        )
        for page_action in (new_catalog, save_catalog):  # the Chat page has its own Ctrl+N
            page_action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            catalog_page.addAction(page_action)
        file_menu.addSeparator()
        self._action(file_menu, "&Quit", self.close, QKeySequence.StandardKey.Quit)

        self.view_menu = self.menuBar().addMenu("&View")
        self.page_actions: dict[str, QAction] = {}
        for spec in PAGES:
            self.page_actions[spec.key] = self._action(
                self.view_menu, f"&{spec.title}", self._page_slot(spec.key), spec.shortcut
            )

        self.view_menu.addSeparator()
        theme_menu = self.view_menu.addMenu("&Theme")
        self.theme_actions = QActionGroup(self)
        for choice, text in (("system", "&System"), ("light", "&Light"), ("dark", "&Dark")):
            action = self._action(theme_menu, text, self._theme_slot(choice))
            action.setCheckable(True)
            action.setChecked(choice == self.themes.choice)
            action.setData(choice)
            self.theme_actions.addAction(action)
        self._action(self.view_menu, "Toggle &dark mode", self.toggle_dark, "Ctrl+Shift+D")

        models_menu = self.menuBar().addMenu("&Models")
        self._action(models_menu, "&Chat…", self.open_chat, "Ctrl+Shift+C")
        self._action(models_menu, "Chat with the &demo model", self.chat_with_demo)
        self._action(models_menu, "&Download…", lambda: self.open_download_wizard())
        self._action(models_menu, "&Publish sidecar…", lambda: self.publish_sidecar(""))
        self._action(models_menu, "Publish every &missing sidecar…", self.publish_missing_sidecars)
        self._action(models_menu, "&New catalog entry…", self.browser.new_entry)
        self._action(
            models_menu,
            "&Refresh sidecar status",
            lambda: self.status_book.refresh(self.browser.model.sidecar_repos(), force=True),
            QKeySequence.StandardKey.Refresh,
        )

        settings_menu = self.menuBar().addMenu("&Settings")
        self._action(
            settings_menu, "&Preferences…", self.open_settings, QKeySequence.StandardKey.Preferences
        )
        self._action(settings_menu, "Sign &in to the Hub…", self.open_sign_in)

        help_menu = self.menuBar().addMenu("&Help")
        self._action(help_menu, "&Keyboard shortcuts", self.show_shortcuts, "Ctrl+/")
        self._action(help_menu, "Open &logs folder", self._open_logs)
        self._action(help_menu, "&About MTP Studio", self._about)

    def _page_slot(self, key: str) -> Callable[[], None]:
        return lambda: self.show_page(key)

    def _theme_slot(self, choice: str) -> Callable[[], None]:
        return lambda: self.set_theme(choice)

    def _add_icons(self) -> None:
        self.sidebar.set_icons(icon)
        self.home.demo_button.setIcon(icon("chat", QPalette.ColorRole.HighlightedText))
        self.home.catalog_button.setIcon(icon("catalog"))
        self.home.download_button.setIcon(icon("download"))
        self.home.models_button.setIcon(icon("models"))
        self.home.sign_in_button.setIcon(icon("key"))
        self.publish_missing_button.setIcon(icon("upload"))
        library = self.library
        for action, name in (
            (library.chat_action, "chat"),
            (library.graft_action, "graft"),
            (library.download_action, "download"),
            (library.reveal_action, "folder"),
            (library.delete_action, "trash"),
        ):
            action.setIcon(icon(name))
            library.buttons[action].setIcon(icon(name))
        for action in (library.reveal_action, library.delete_action):  # icon-only: the tooltip
            button = library.buttons[action]  # and the context menu say what they do
            button.setText("")
            button.setAccessibleName(action.text())
        library.refresh_button.setIcon(icon("refresh"))
        self._show_scheme(self.themes.scheme)

    # -- look ---------------------------------------------------------------------------------

    def set_theme(self, choice: str) -> None:
        """Use ``choice`` (system, light or dark) now and in later runs."""
        self.themes.set_choice(choice)
        for action in self.theme_actions.actions():
            action.setChecked(action.data() == choice)
        self._save_settings(replace(self.settings, theme=choice))

    def toggle_dark(self) -> None:
        self.set_theme("light" if self.themes.scheme == "dark" else "dark")

    def _show_scheme(self, scheme: str) -> None:
        dark = scheme == "dark"
        self.sidebar.theme_button.setText("Light mode" if dark else "Dark mode")
        self.sidebar.theme_button.setIcon(icon("sun" if dark else "moon"))
        self.sidebar.theme_button.setToolTip(
            "Switch to the light look" if dark else "Switch to the dark look"
        )

    def shortcut_groups(self) -> dict[str, list[QAction]]:
        """Every action with a shortcut, by where it works (for Help → Keyboard shortcuts)."""
        pages = list(self.page_actions.values())
        groups: dict[str, list[QAction]] = {"Pages": pages}
        for menu_action in self.menuBar().actions():
            menu = menu_action.menu()
            if menu is not None:
                actions = [action for action in menu.actions() if action not in pages]
                groups[menu_action.text().replace("&", "")] = actions
        if self.chat_window is not None:
            groups["Chat"] = list(self.chat_window.actions())
        return groups

    def show_shortcuts(self) -> ShortcutsDialog:
        self.shortcuts_dialog = ShortcutsDialog(shortcut_rows(self.shortcut_groups()), self)
        self.shortcuts_dialog.open()
        return self.shortcuts_dialog

    def _action(
        self,
        menu: object,
        text: str,
        slot: Callable[[], object],
        shortcut: QKeySequence.StandardKey | str | None = None,
    ) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        action.triggered.connect(lambda _checked=False: slot())
        menu.addAction(action)  # type: ignore[attr-defined]
        return action

    def _open_catalog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open catalog", "", "Catalog (*.yaml *.yml)")
        if path:
            self.browser.open_files([Path(path)])

    def _merge_catalog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Merge catalog", "", "Catalog (*.yaml *.yml)")
        if path:
            self.browser.merge_file(Path(path))

    def _new_catalog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self, "New catalog", "my-catalog.yaml", "Catalog (*.yaml)"
        )
        if path:
            self.browser.create_file(Path(path))

    def _open_logs(self) -> None:
        self.dirs.logs.mkdir(parents=True, exist_ok=True)
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.dirs.logs)))

    def _about(self) -> None:
        self.about_box = QMessageBox(
            QMessageBox.Icon.NoIcon,
            "About MTP Studio",
            about_html(self.dirs, self.store.path),
            parent=self,
        )
        self.about_box.setIconPixmap(app_icon().pixmap(64, 64))
        self.about_box.open()

    # -- state --------------------------------------------------------------------------------

    def _load_settings(self) -> tuple[Settings, MtpStudioError | None]:
        try:
            return self.settings_store.load(), None
        except MtpStudioError as exc:
            return Settings(), exc

    def _open_store(self) -> tuple[JobStore, MtpStudioError | None]:
        try:
            return JobStore(self.dirs.job_database), None
        except MtpStudioError as exc:
            fallback = Path(tempfile.mkdtemp(prefix="mtp-studio-jobs-")) / "jobs.sqlite3"
            return JobStore(fallback), MtpStudioError(
                f"{exc}\nThis session records its jobs in {fallback} instead."
            )

    def _apply_settings(self, settings: Settings) -> None:
        self.settings = settings
        if self.chat_window is not None:
            self.chat_window.apply_settings(settings)
        self.status_book.set_endpoint(settings.endpoint)
        self.status_book.refresh(self.browser.model.sidecar_repos())
        self.browser._on_selection()
        self.browser.model.layoutChanged.emit()
        self._update_status()

    def _remember_catalog_files(self, files: list[str]) -> None:
        if tuple(files) != self.settings.catalog_files:
            self._save_settings(replace(self.settings, catalog_files=tuple(files)))

    def _save_settings(self, settings: Settings) -> None:
        self.settings = settings
        try:
            self.settings_store.save(settings)
        except MtpStudioError as exc:
            show_error(self, "Cannot save the settings", exc)

    def _after_job(self, job_id: int, state: str, _message: str) -> None:
        """A finished publish changes what the Hub holds: ask again about that sidecar."""
        self._update_status()
        row = self.jobs.job(job_id)
        sidecar = row.record.spec.params.get("sidecar_repo") if row else None
        if state == JobState.SUCCEEDED and isinstance(sidecar, str):
            self.status_book.refresh([sidecar], force=True)
        if state == JobState.SUCCEEDED and row and row.record.spec.kind == GET_KIND:
            ready = (row.record.result or {}).get("ready_path")
            self.library.refresh(select=Path(ready) if ready else None)

    def _update_status(self) -> None:
        self.endpoint_label.setText(f"Hub: {mask_credentials(self.settings.endpoint)}")
        self.token_label.setText(token_summary())
        running = len(self.runner.running_jobs())
        self.jobs_label.setText(f"{running} job(s) running" if running else "No job running")

    def _update_title(self) -> None:
        files = self.browser.user_files()
        shown = ", ".join(path.name for path in files) if files else "bundled catalog"
        self.setWindowTitle(f"MTP Studio — {shown}{' *' if self.browser.modified else ''}")

    # -- closing ------------------------------------------------------------------------------

    def closeEvent(self, event: QCloseEvent) -> None:
        if not self.shut_down and not self._confirm_close():
            event.ignore()
            return
        self.shutdown()
        event.accept()

    def _confirm_close(self) -> bool:
        if self.browser.modified:
            answer = QMessageBox.question(
                self,
                "Unsaved catalog changes",
                "Save the catalog changes before quitting?",
                QMessageBox.StandardButton.Save
                | QMessageBox.StandardButton.Discard
                | QMessageBox.StandardButton.Cancel,
            )
            if answer == QMessageBox.StandardButton.Cancel:
                return False
            if answer == QMessageBox.StandardButton.Save and not self.browser.save():
                return False
        running = len(self.runner.running_jobs())
        if running:
            answer = QMessageBox.question(
                self,
                "Jobs are running",
                f"{running} job(s) are running. Quit anyway? They are marked interrupted and can "
                "be retried from the Jobs page; downloads continue where they stopped.",
            )
            return answer == QMessageBox.StandardButton.Yes
        return True

    def shutdown(self) -> None:
        """Stop jobs (recorded as interrupted) and background checks, close the job store and
        history, and release the theme manager the window gave the application."""
        if self.shut_down:
            return
        self.shut_down = True
        self.window_state.save(self, self.current_page, self._splitters())
        for window in list(self.open_wizards):
            window.close()
        if self.chat_window is not None:
            self.chat_window.shutdown()
        self.server_panel.shutdown()
        self.runner.shutdown()
        self.status_book.shutdown()
        self.store.close()
        self.history.close()
        self.themes.deleteLater()  # owned by the application: alive, it follows the OS scheme


def _page(
    title: str, subtitle: str, body: QWidget, actions: list[QWidget] | None = None
) -> QWidget:
    """A page: its title and one line on what it is for (with its actions beside them), then
    its content."""
    page = QWidget()
    heading = QLabel(title)
    heading.setObjectName("pageTitle")
    about = QLabel(subtitle)
    about.setObjectName("pageSubtitle")
    about.setWordWrap(True)
    titles = QVBoxLayout()
    titles.setSpacing(2)
    titles.addWidget(heading)
    titles.addWidget(about)
    header = QHBoxLayout()
    header.addLayout(titles, 1)
    for action in actions or []:
        header.addWidget(action, 0, Qt.AlignmentFlag.AlignBottom)
    layout = QVBoxLayout(page)
    layout.setContentsMargins(20, 16, 20, 8)
    layout.setSpacing(12)
    layout.addLayout(header)
    layout.addWidget(body, 1)
    return page


def _application() -> QApplication:
    app = QApplication.instance()
    assert isinstance(app, QApplication), "the main window needs a QApplication"
    return app
