"""The main window: one window, a sidebar of pages (Home, Models, Catalog, Chat, Jobs, Server).

It owns the long-lived parts — the settings (:class:`~app.ui.shell.settings_source.SettingsSource`,
read by every page when it acts), the job store and runner, the chat history — builds the pages,
wires what one page asks of another, and closes everything it opened when it closes. The rest has
a room of its own in :mod:`app.ui.shell`: the Catalog page with its files and publish queue, the
Chat page (built when the app is idle; its models scan and worker wait for the first look), the
wizards and jobs pages ask for (:mod:`~app.ui.shell.workflows`), the menus, the look, the status
bar, and the window's size (fitted to the screen on a first run) and arrangement (kept between
runs).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QTimer, QUrl
from PySide6.QtGui import QAction, QActionGroup, QCloseEvent, QDesktopServices, QShowEvent
from PySide6.QtWidgets import (
    QApplication,
    QHBoxLayout,
    QMainWindow,
    QMessageBox,
    QSplitter,
    QStackedWidget,
    QWidget,
)

from app.engine.catalog import CatalogEntry
from app.engine.chat.history import HISTORY_FILE_NAME
from app.engine.chat.model_files import GGUF
from app.engine.errors import MtpStudioError
from app.engine.hub.drafter_lookup import catalog_drafters
from app.engine.hub.get import GET_KIND
from app.engine.hub.search import catalog_sidecars
from app.engine.library.inventory import LibraryModel
from app.engine.settings import AppDirs, Settings, SettingsStore, app_dirs, token_status
from app.engine.store import JobState
from app.ui.about import about_html
from app.ui.background import run_in_background
from app.ui.catalog.browser import CatalogBrowser
from app.ui.catalog.status import SidecarStatusBook
from app.ui.chat import ChatWindow
from app.ui.errors import readable, show_error
from app.ui.jobs.model import JobTableModel
from app.ui.jobs.monitor import JobMonitor
from app.ui.jobs.runner import JobRunner
from app.ui.library.page import LibraryPage
from app.ui.look import ThemeManager
from app.ui.resources import app_icon
from app.ui.server import ServerPanel
from app.ui.settings_dialog import SettingsDialog, SignInDialog, token_summary
from app.ui.shell.catalog_page import CatalogPage
from app.ui.shell.chat_page import ChatPage
from app.ui.shell.closing import may_close
from app.ui.shell.home import HomePage
from app.ui.shell.look_control import LookControl
from app.ui.shell.menus import MenuHandlers, build_menus
from app.ui.shell.page_frame import scrolled, titled_page
from app.ui.shell.pages import CATALOG, CHAT, HOME, JOBS, MODELS, PAGES, SERVER
from app.ui.shell.settings_source import SettingsSource
from app.ui.shell.shortcuts import ShortcutsDialog, shortcut_groups, shortcut_rows
from app.ui.shell.sidebar import Sidebar
from app.ui.shell.status_line import StatusLine
from app.ui.shell.window_size import keep_on_screen, place_first_run
from app.ui.shell.window_state import WindowState
from app.ui.shell.workflows import Workflows
from app.ui.stores import open_history, open_job_store
from app.ui.wheel_guard import install_wheel_guard
from app.ui.wizards.download import DownloadWizard
from app.ui.wizards.publish import PublishWizard

WINDOW_STATE_FILE = "window-state.ini"


class MainWindow(QMainWindow):
    def __init__(self, dirs: AppDirs | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("mainWindow")
        install_wheel_guard(_application())
        self.dirs = dirs or app_dirs()
        self.settings_source = SettingsSource(SettingsStore(self.dirs.settings_file), self)
        self.store, store_problem = open_job_store(self.dirs)
        self.history, history_problem = open_history(self.dirs.data / HISTORY_FILE_NAME)
        self.runner = JobRunner(self.store, self)
        self.jobs = JobTableModel(self.runner, self)
        self.window_state = WindowState(self.dirs.config / WINDOW_STATE_FILE)
        self.workflows = Workflows(self, self.dirs, self.settings_source, self.runner, self.jobs)
        self.shut_down = False
        self._models_path = self.settings.models_path()
        self.sidebar = Sidebar()
        # the look first: styling the window before its pages exist costs nothing
        self.look = LookControl(self.settings.theme, self.sidebar, self._save_theme, self)
        self._build_pages()
        self.status_line = StatusLine(self.statusBar(), lambda: self.settings, self.runner)
        self.menus = build_menus(self, self.catalog, self.look, self._menu_handlers())
        self._connect()

        first_run = not self.window_state.has_geometry()
        if first_run:
            place_first_run(self)
        saved_page = self.window_state.restore(self, self._splitters())
        self._check_on_screen = first_run
        self.show_page(saved_page if saved_page in self.page_widgets else HOME)
        self._update_status()
        self._update_title()
        self._tell_library_the_sidecars()
        for title, problem in (
            ("Settings could not be read", self.settings_source.problem),
            ("Job history could not be opened", store_problem),
            ("Chat history could not be opened", history_problem),
        ):
            if problem is not None:
                show_error(self, title, problem)

    def _build_pages(self) -> None:
        self.home = HomePage(self.jobs)
        self.library = LibraryPage(self.dirs, lambda: self.settings, self.history, self)
        self.library.model_in_use = self._model_in_chat
        self.catalog = CatalogPage(self.dirs, self.settings_source, self.runner)
        self.chat_page = ChatPage(self.dirs, self.settings_source, self.runner, self._chat_built)
        self.monitor = JobMonitor(self.runner, self.jobs)
        self.server_panel = ServerPanel(self)
        self.page_widgets: dict[str, QWidget] = {
            HOME: self.home,
            MODELS: self.library,
            CATALOG: self.catalog,
            CHAT: self.chat_page,
            JOBS: titled_page(
                "Jobs",
                "Downloads, publishes, grafts and conversions: progress, pause, cancel, history.",
                self.monitor,
            ),
            SERVER: titled_page(
                "Server",
                "Serve a model with MTP to editors, agents and Claude Code through OpenAI- and "
                "Anthropic-compatible APIs.",
                scrolled(self.server_panel),
            ),
        }
        self.pages = QStackedWidget()
        for spec in PAGES:
            self.pages.addWidget(self.page_widgets[spec.key])
        central = QWidget()
        layout = QHBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.sidebar)
        layout.addWidget(self.pages, 1)
        self.setCentralWidget(central)

    def _menu_handlers(self) -> MenuHandlers:
        return MenuHandlers(
            show_page=self.show_page,
            new_conversation=self.new_conversation,
            open_chat=self.open_chat,
            chat_with_demo=self.chat_with_demo,
            download=lambda: self.open_download_wizard(),
            publish=lambda: self.publish_sidecar(""),
            open_settings=self.open_settings,
            open_sign_in=self.open_sign_in,
            show_shortcuts=self.show_shortcuts,
            open_logs=self._open_logs,
            about=self._about,
        )

    def _connect(self) -> None:
        self.sidebar.page_chosen.connect(self._show_chosen_page)
        self.settings_source.changed.connect(self._settings_changed)
        home = self.home
        home.demo_chat_requested.connect(self.chat_with_demo)
        home.catalog_requested.connect(lambda: self.show_page(CATALOG))
        home.download_requested.connect(self.discover_models)
        home.sign_in_requested.connect(self.open_sign_in)
        home.conversation_chosen.connect(self.open_conversation)
        home.jobs_requested.connect(lambda: self.show_page(JOBS))
        home.models_requested.connect(lambda: self.show_page(MODELS))
        library = self.library
        library.chat_requested.connect(lambda path: self.open_chat().open_model(path))
        library.graft_requested.connect(self.workflows.add_head)
        library.download_sidecar_requested.connect(self.workflows.download_sidecar)
        library.get_requested.connect(
            lambda job: library.discover.follow(self.workflows.get(job), self.runner)
        )
        library.models_changed.connect(self._offer_models_to_serve)
        self.workflows.graft.succeeded.connect(lambda path: self.library.refresh(select=path))
        detail = self.browser.detail
        detail.download_model_requested.connect(self.download_model)
        detail.download_sidecar_requested.connect(self.download_sidecar)
        detail.publish_requested.connect(self.publish_sidecar)
        detail.chat_requested.connect(self._chat_with_entry)
        self.browser.catalog_changed.connect(self._update_title)
        self.browser.catalog_changed.connect(self._tell_library_the_sidecars)
        self.catalog.sign_in_requested.connect(self.open_sign_in)
        self.monitor.chat_requested.connect(lambda path: self.open_chat().open_model(path))
        self.runner.job_started.connect(lambda _job: self._update_status())
        self.runner.job_finished.connect(self._after_job)

    # -- what the pages share -----------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        """The settings as saved now."""
        return self.settings_source.current

    @property
    def browser(self) -> CatalogBrowser:
        return self.catalog.browser

    @property
    def status_book(self) -> SidecarStatusBook:
        return self.catalog.status_book

    @property
    def chat_window(self) -> ChatWindow | None:
        """The Chat page's chat, once built."""
        return self.chat_page.chat_window

    @property
    def open_wizards(self) -> list[QWidget]:
        return self.workflows.open_wizards

    @property
    def page_actions(self) -> dict[str, QAction]:
        return self.menus.page_actions

    # -- pages --------------------------------------------------------------------------------

    @property
    def current_page(self) -> str:
        return self.sidebar.current_key

    def show_page(self, key: str) -> None:
        """Switch to page ``key`` (the chat is built the first time it is shown)."""
        if self.sidebar.current_key == key:
            self._show_chosen_page(key)
        else:
            self.sidebar.select(key)  # its page_chosen signal shows the page

    def _show_chosen_page(self, key: str) -> None:
        if key == CHAT:
            self.chat_page.ensure()
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

    def discover_models(self) -> None:
        """Home's "Download a model…": the Models page, searching the Hub."""
        self.show_page(MODELS)
        self.library.show_discover()

    # -- chat ---------------------------------------------------------------------------------

    def open_chat(self, entry: CatalogEntry | None = None) -> ChatWindow:
        """Show the Chat page; for a catalog ``entry``, on its downloaded model."""
        self.show_page(CHAT)
        return self.chat_page.show_entry(entry) if entry else self.chat_page.ensure()

    def chat_with_demo(self) -> ChatWindow:
        """Show the Chat page on the bundled demo model."""
        chat = self.open_chat()
        chat.use_demo_model()
        return chat

    def open_conversation(self, conversation_id: int) -> ChatWindow:
        chat = self.open_chat()
        chat.open_conversation(conversation_id)
        return chat

    def new_conversation(self) -> ChatWindow:
        """Ctrl+N wherever the focus is: the Chat page on a new, empty conversation."""
        chat = self.open_chat()
        chat.new_conversation()
        return chat

    def _model_in_chat(self) -> Path | None:
        return self.chat_window.loaded_model if self.chat_window is not None else None

    def _chat_built(self, chat: ChatWindow) -> None:
        self.window_state.restore_splitters({"chat": chat.splitter})

    def _chat_with_entry(self, key: str) -> None:
        entry = self.catalog.entry(key)
        if entry is not None:
            self.open_chat(entry)

    # -- wizards and dialogs ------------------------------------------------------------------

    def download_model(self, key: str) -> None:
        entry = self.catalog.entry(key)
        if entry is not None:
            self.workflows.download_entry(entry)

    def download_sidecar(self, key: str) -> None:
        entry = self.catalog.entry(key)
        if entry is not None and entry.mtp_sidecar_repo:
            self.workflows.download_sidecar(entry.mtp_sidecar_repo)

    def open_download_wizard(
        self, repo_id: str = "", include: tuple[str, ...] = (), *, sidecar_repo: str = ""
    ) -> DownloadWizard:
        return self.workflows.open_download_wizard(repo_id, include, sidecar_repo=sidecar_repo)

    def publish_sidecar(self, key: str = "") -> PublishWizard:
        return self.workflows.publish_sidecar(self.browser.valid_entries(), key)

    def publish_missing_sidecars(self) -> QMessageBox:
        return self.catalog.publish_missing_sidecars()

    def open_settings(self) -> SettingsDialog:
        return self.workflows.open_settings()

    def open_sign_in(self) -> SignInDialog:
        dialog = self.workflows.open_sign_in()
        dialog.signed_in.connect(lambda _user: self._update_status())
        return dialog

    def show_shortcuts(self) -> ShortcutsDialog:
        chat_actions = list(self.chat_window.actions()) if self.chat_window is not None else []
        groups = shortcut_groups(self.menuBar(), list(self.page_actions.values()), chat_actions)
        self.shortcuts_dialog = ShortcutsDialog(shortcut_rows(groups), self)
        self.shortcuts_dialog.open()
        return self.shortcuts_dialog

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

    # -- look and state -----------------------------------------------------------------------

    @property
    def themes(self) -> ThemeManager:
        return self.look.themes

    @property
    def theme_actions(self) -> QActionGroup:
        return self.menus.theme_actions

    def set_theme(self, choice: str) -> None:
        """Use ``choice`` (system, light or dark) now and in later runs."""
        self.look.set_theme(choice)

    def toggle_dark(self) -> None:
        self.look.toggle_dark()

    def _save_theme(self, choice: str) -> None:
        try:
            self.settings_source.update(theme=choice)
        except MtpStudioError as exc:
            show_error(self, "Cannot save the settings", exc)

    def _settings_changed(self, settings: Settings) -> None:
        """Saved settings apply at once: the status bar, and the Models page when the models
        folder moved (the Catalog and Chat pages listen themselves)."""
        self._update_status()
        if settings.models_path() != self._models_path:
            self._models_path = settings.models_path()
            self.library.refresh()

    def _after_job(self, job_id: int, state: str, _message: str) -> None:
        """A finished publish changes what the Hub holds: ask again about that sidecar; a
        finished Get puts a model on disk: show it on the Models page."""
        self._update_status()
        row = self.jobs.job(job_id)
        if state != JobState.SUCCEEDED or row is None:
            return
        sidecar = row.record.spec.params.get("sidecar_repo")
        if isinstance(sidecar, str):
            self.status_book.refresh([sidecar], force=True)
        if row.record.spec.kind == GET_KIND:
            ready = (row.record.result or {}).get("ready_path")
            self.library.refresh(select=Path(ready) if ready else None)

    def _offer_models_to_serve(self, models: list[LibraryModel]) -> None:
        """The Server page picks from the GGUF models the Models page found."""
        self.server_panel.set_models(
            [
                (model.name, model.path)
                for model in models
                if model.description.kind == GGUF and model.description.runnable
            ]
        )

    def _tell_library_the_sidecars(self) -> None:
        entries = self.browser.valid_entries()
        self.library.discover.set_sidecars(catalog_sidecars(entries))
        self.library.discover.set_drafters(catalog_drafters(entries))
        self.library.set_catalog_sidecars(
            {entry.hf_repo: entry.mtp_sidecar_repo for entry in entries if entry.mtp_sidecar_repo}
        )

    def _update_status(self) -> None:
        self.status_line.update()

    def _update_title(self) -> None:
        self.setWindowTitle(self.catalog.title())

    def _splitters(self) -> dict[str, QSplitter]:
        # "jobs-stacked": the Jobs page's list now sits above its details; a saved state of
        # the side-by-side splitter would bring its orientation back
        splitters = {"catalog": self.browser.splitter, "jobs-stacked": self.monitor.splitter}
        if self.chat_window is not None:
            splitters["chat"] = self.chat_window.splitter
        return splitters

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self._check_on_screen:  # the frame's real size is known once the window is shown
            self._check_on_screen = False
            QTimer.singleShot(0, lambda: keep_on_screen(self))

    # -- closing ------------------------------------------------------------------------------

    def closeEvent(self, event: QCloseEvent) -> None:
        if not self.shut_down and not may_close(self, self.browser, self.runner):
            event.ignore()
            return
        self.shutdown()
        event.accept()

    def shutdown(self) -> None:
        """Release everything this window opened: wizards, the chat and its worker, the server,
        running jobs (recorded as interrupted), background checks, the theme manager, and the job
        and chat histories."""
        if self.shut_down:
            return
        self.shut_down = True
        self.window_state.save(self, self.current_page, self._splitters())
        self.workflows.close_wizards()
        self.chat_page.shutdown()
        self.server_panel.shutdown()
        self.runner.shutdown()
        self.catalog.shutdown()
        self.look.shutdown()
        self.store.close()
        self.history.close()
        self.themes.deleteLater()  # owned by the application: alive, it follows the OS scheme


def _application() -> QApplication:
    app = QApplication.instance()
    assert isinstance(app, QApplication), "the main window needs a QApplication"
    return app
