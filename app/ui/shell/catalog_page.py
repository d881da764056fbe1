"""The main window's Catalog page: the catalog browser, its files, and publishing what is missing.

What it owns: the sidecar status book (which sidecars the Hub has), the publish queue ("Publish
every missing sidecar…", run one after another) and the catalog files the user opened, which it
remembers in the settings so the next start opens them again. Downloading, publishing one entry
and chatting are asked of the window through the browser's detail pane.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFileDialog, QLabel, QMessageBox, QPushButton, QWidget

from app.engine.catalog import CatalogEntry
from app.engine.errors import MtpStudioError
from app.engine.settings import AppDirs, token_status
from app.ui.catalog.browser import CatalogBrowser
from app.ui.catalog.publish_queue import PublishQueue, missing_sidecars
from app.ui.catalog.status import SidecarStatusBook
from app.ui.errors import show_error
from app.ui.icons import icon
from app.ui.jobs.runner import JobRunner
from app.ui.shell.page_frame import frame_page
from app.ui.shell.settings_source import SettingsSource

STATUS_CACHE_FILE = "sidecar-status.json"
CATALOG_FILTER = "Catalog (*.yaml *.yml)"


class CatalogPage(QWidget):
    """``sign_in_requested`` when publishing needs a token first."""

    sign_in_requested = Signal()

    def __init__(
        self,
        dirs: AppDirs,
        settings: SettingsSource,
        runner: JobRunner,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._settings = settings
        self.status_book = SidecarStatusBook(
            dirs.cache / STATUS_CACHE_FILE, settings.current.endpoint, self
        )
        self._endpoint = settings.current.endpoint
        self.publish_queue = PublishQueue(runner, lambda: settings.current, self)
        self.browser = CatalogBrowser(self.status_book, self)
        self.publish_missing_button = QPushButton("Publish every missing sidecar…")
        self.publish_missing_button.setIcon(icon("upload"))
        self.publish_missing_button.setToolTip(
            "One publish job per sidecar the Hub does not have yet, run one after another"
        )
        self.queue_label = QLabel()
        self.queue_label.setObjectName("muted")
        self.cancel_queue_button = QPushButton("Cancel waiting publishes")
        self.cancel_queue_button.hide()
        frame_page(
            self,
            "Catalog",
            "Models known to carry MTP heads, their downloads and their sidecars.",
            self.browser,
            [self.queue_label, self.cancel_queue_button, self.publish_missing_button],
        )
        self.publish_missing_box: QMessageBox | None = None
        self.publish_missing_button.clicked.connect(self.publish_missing_sidecars)
        self.cancel_queue_button.clicked.connect(self.publish_queue.cancel_waiting)
        self.publish_queue.changed.connect(self._show_queue)
        self.browser.files_changed.connect(self._remember_files)
        settings.changed.connect(self._apply_settings)
        if not self.browser.open_saved(settings.current.catalog_files):
            self.browser.open_files([])

    def entry(self, key: str) -> CatalogEntry | None:
        """The valid entry ``key`` (None, and the reason shown, when it has problems)."""
        try:
            return self.browser.entry(key)
        except MtpStudioError as exc:
            show_error(self, f"Cannot use {key}", exc)
            return None

    def refresh_status(self) -> None:
        """Ask the Hub again about every sidecar the catalog names."""
        self.status_book.refresh(self.browser.model.sidecar_repos(), force=True)

    def shutdown(self) -> None:
        self.status_book.shutdown()

    # -- catalog files ------------------------------------------------------------------------

    def open_catalog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open catalog", "", CATALOG_FILTER)
        if path:
            self.browser.open_files([Path(path)])

    def merge_catalog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Merge catalog", "", CATALOG_FILTER)
        if path:
            self.browser.merge_file(Path(path))

    def new_catalog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self, "New catalog", "my-catalog.yaml", "Catalog (*.yaml)"
        )
        if path:
            self.browser.create_file(Path(path))

    def title(self) -> str:
        """The window title: the open catalog files, a star when they have unsaved changes."""
        files = self.browser.user_files()
        shown = ", ".join(path.name for path in files) if files else "bundled catalog"
        return f"MTP Studio — {shown}{' *' if self.browser.modified else ''}"

    def _remember_files(self, files: list[str]) -> None:
        if tuple(files) != self._settings.current.catalog_files:
            try:
                self._settings.update(catalog_files=tuple(files))
            except MtpStudioError as exc:
                show_error(self, "Cannot save the settings", exc)

    def _apply_settings(self, settings: object) -> None:
        endpoint = self._settings.current.endpoint
        if endpoint != self._endpoint:  # a Hub saved in Settings: ask it about the sidecars
            self._endpoint = endpoint
            self.status_book.set_endpoint(endpoint)
            self.status_book.refresh(self.browser.model.sidecar_repos())
            self.browser.model.layoutChanged.emit()
        self.browser.refresh_detail()

    # -- publishing what is missing -----------------------------------------------------------

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
            box.finished.connect(lambda _result: self.sign_in_requested.emit())
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

    def _show_queue(self) -> None:
        self.queue_label.setText(self.publish_queue.summary())
        self.cancel_queue_button.setVisible(self.publish_queue.waiting > 0)
