"""The main window: catalog browser in the middle, job monitor docked below, menus around them.

It owns the long-lived parts (settings, job store, job runner, sidecar status book) and hands
them to the windows it opens. Other features plug in here: :meth:`MainWindow.set_chat_handler`
enables the detail pane's Chat button, :attr:`runner` starts any engine job with progress in the
monitor, and :meth:`add_dock` adds a panel.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QAction, QCloseEvent, QDesktopServices, QKeySequence
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QWidget,
)

from app.engine.catalog import CatalogEntry
from app.engine.errors import MtpStudioError
from app.engine.settings import AppDirs, Settings, SettingsStore, app_dirs
from app.engine.store import JobState, JobStore
from app.ui.about import about_html
from app.ui.catalog.browser import CatalogBrowser
from app.ui.catalog.status import SidecarStatusBook
from app.ui.chat import ChatWindow
from app.ui.errors import show_error
from app.ui.jobs.model import JobTableModel
from app.ui.jobs.monitor import JobMonitor
from app.ui.jobs.runner import JobRunner
from app.ui.resources import app_icon
from app.ui.server import install_server_panel
from app.ui.settings_dialog import SettingsDialog, SignInDialog, token_summary
from app.ui.wizards.download import DownloadWizard
from app.ui.wizards.publish import PublishWizard

ChatHandler = Callable[[CatalogEntry], None]


class MainWindow(QMainWindow):
    def __init__(self, dirs: AppDirs | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.dirs = dirs or app_dirs()
        self.settings_store = SettingsStore(self.dirs.settings_file)
        self.settings, settings_problem = self._load_settings()
        self.store, store_problem = self._open_store()
        self.runner = JobRunner(self.store, self)
        self.jobs = JobTableModel(self.runner, self)
        self.status_book = SidecarStatusBook(
            self.dirs.cache / "sidecar-status.json", self.settings.endpoint, self
        )
        self._chat_handler: ChatHandler | None = None
        self.chat_window: ChatWindow | None = None
        self.shut_down = False
        self.open_wizards: list[QWidget] = []

        self.browser = CatalogBrowser(self.status_book, self)
        self.setCentralWidget(self.browser)
        self.monitor = JobMonitor(self.runner, self.jobs)
        self.monitor_dock = self.add_dock(
            "Jobs", self.monitor, Qt.DockWidgetArea.BottomDockWidgetArea
        )
        self.endpoint_label = QLabel()
        self.token_label = QLabel()
        self.jobs_label = QLabel()
        for label in (self.endpoint_label, self.token_label):
            self.statusBar().addWidget(label)
        self.statusBar().addPermanentWidget(self.jobs_label)

        self._build_menus()
        self.server_panel = install_server_panel(self)
        self.browser.detail.download_model_requested.connect(self.download_model)
        self.browser.detail.download_sidecar_requested.connect(self.download_sidecar)
        self.browser.detail.publish_requested.connect(self.publish_sidecar)
        self.browser.detail.chat_requested.connect(self._chat)
        self.set_chat_handler(self.open_chat)
        self.browser.catalog_changed.connect(self._update_title)
        self.browser.files_changed.connect(self._remember_catalog_files)
        self.runner.job_started.connect(lambda _job: self._update_status())
        self.runner.job_finished.connect(self._after_job)

        if not self.browser.open_saved(self.settings.catalog_files):
            self.browser.open_files([])
        self.resize(1280, 820)
        self._update_status()
        self._update_title()
        for title, problem in (
            ("Settings could not be read", settings_problem),
            ("Job history could not be opened", store_problem),
        ):
            if problem is not None:
                show_error(self, title, problem)

    # -- plug-in points -----------------------------------------------------------------------

    def add_dock(
        self,
        title: str,
        widget: QWidget,
        area: Qt.DockWidgetArea = Qt.DockWidgetArea.RightDockWidgetArea,
    ) -> QDockWidget:
        """Dock ``widget`` under ``title`` and list it in the View menu."""
        dock = QDockWidget(title, self)
        dock.setObjectName(f"dock-{title.lower()}")
        dock.setWidget(widget)
        self.addDockWidget(area, dock)
        if hasattr(self, "view_menu"):
            self.view_menu.addAction(dock.toggleViewAction())
        return dock

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
        """Show the chat window; for a catalog ``entry``, on its downloaded model."""
        if self.chat_window is None or self.chat_window.closed:
            self.chat_window = ChatWindow(self.dirs, self.settings, self, jobs=self.runner)
        if entry is not None:
            self.chat_window.show_for_repo(entry.hf_repo, entry.mtp_sidecar_repo)
        else:
            self.chat_window.show()
            self.chat_window.raise_()
        return self.chat_window

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
        file_menu = self.menuBar().addMenu("&File")
        self._action(file_menu, "&Open catalog…", self._open_catalog, QKeySequence.StandardKey.Open)
        self._action(file_menu, "&Merge catalog…", self._merge_catalog)
        self._action(file_menu, "&New catalog…", self._new_catalog, QKeySequence.StandardKey.New)
        self._action(
            file_menu, "Use the &bundled catalog only", lambda: self.browser.open_files([])
        )
        self._action(file_menu, "&Save catalog", self.browser.save, QKeySequence.StandardKey.Save)
        file_menu.addSeparator()
        self._action(file_menu, "&Quit", self.close, QKeySequence.StandardKey.Quit)

        models_menu = self.menuBar().addMenu("&Models")
        chat_action = self._action(models_menu, "&Chat…", self.open_chat)
        chat_action.setShortcut(QKeySequence("Ctrl+Shift+C"))
        self._action(models_menu, "&Download…", lambda: self.open_download_wizard())
        self._action(models_menu, "&Publish sidecar…", lambda: self.publish_sidecar(""))
        self._action(models_menu, "&New catalog entry…", self.browser.new_entry)
        self._action(
            models_menu,
            "&Refresh sidecar status",
            lambda: self.status_book.refresh(self.browser.model.sidecar_repos(), force=True),
            QKeySequence.StandardKey.Refresh,
        )

        self.view_menu = self.menuBar().addMenu("&View")
        self.view_menu.addAction(self.monitor_dock.toggleViewAction())

        settings_menu = self.menuBar().addMenu("&Settings")
        self._action(
            settings_menu, "&Preferences…", self.open_settings, QKeySequence.StandardKey.Preferences
        )
        self._action(settings_menu, "Sign &in to the Hub…", self.open_sign_in)

        help_menu = self.menuBar().addMenu("&Help")
        self._action(help_menu, "Open &logs folder", self._open_logs)
        self._action(help_menu, "&About MTP Studio", self._about)

    def _action(
        self,
        menu: object,
        text: str,
        slot: Callable[[], object],
        shortcut: QKeySequence.StandardKey | None = None,
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
        self.status_book.set_endpoint(settings.endpoint)
        self.status_book.refresh(self.browser.model.sidecar_repos())
        self.browser._on_selection()
        self.browser.model.layoutChanged.emit()
        self._update_status()

    def _remember_catalog_files(self, files: list[str]) -> None:
        if tuple(files) == self.settings.catalog_files:
            return
        self.settings = replace(self.settings, catalog_files=tuple(files))
        try:
            self.settings_store.save(self.settings)
        except MtpStudioError as exc:
            show_error(self, "Cannot save the settings", exc)

    def _after_job(self, job_id: int, state: str, _message: str) -> None:
        """A finished publish changes what the Hub holds: ask again about that sidecar."""
        self._update_status()
        row = self.jobs.job(job_id)
        sidecar = row.record.spec.params.get("sidecar_repo") if row else None
        if state == JobState.SUCCEEDED and isinstance(sidecar, str):
            self.status_book.refresh([sidecar], force=True)

    def _update_status(self) -> None:
        self.endpoint_label.setText(f"Hub: {self.settings.endpoint}")
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
                "be retried from the job monitor; downloads continue where they stopped.",
            )
            return answer == QMessageBox.StandardButton.Yes
        return True

    def shutdown(self) -> None:
        """Stop jobs (recorded as interrupted), background checks, and close the job store."""
        if self.shut_down:
            return
        self.shut_down = True
        for window in list(self.open_wizards):
            window.close()
        if self.chat_window is not None:
            self.chat_window.shutdown()
        self.runner.shutdown()
        self.status_book.shutdown()
        self.store.close()
