"""What the main window's pages ask for and another part does: wizards, dialogs and jobs.

Pages only say what the user wants (download this repo, publish that entry, add the MTP head to
this model, get that quantisation); this object opens the wizard or dialog with the settings as
saved now, or starts the job, and keeps each open wizard alive until it is closed. Finished work
that changes what is on disk (a graft, a Get) is shown on the Models page.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QWidget

from app.engine.catalog import CatalogEntry
from app.engine.chat.model_files import describe_model
from app.engine.hub.get import GET_KIND, GetJob
from app.engine.settings import AppDirs
from app.engine.store import JobSpec
from app.ui.background import run_in_background
from app.ui.chat.controls.graft_action import GraftAction
from app.ui.errors import readable, show_error
from app.ui.jobs.model import JobTableModel
from app.ui.jobs.runner import JobRunner
from app.ui.settings_dialog import SettingsDialog, SignInDialog
from app.ui.shell.settings_source import SettingsSource
from app.ui.wizards.download import DownloadWizard
from app.ui.wizards.publish import PublishWizard

SIDECAR_FILE = "mtp.safetensors"


class Workflows(QObject):
    """Opens wizards and dialogs over ``window`` and starts the jobs pages ask for."""

    def __init__(
        self,
        window: QWidget,
        dirs: AppDirs,
        settings: SettingsSource,
        runner: JobRunner,
        jobs: JobTableModel,
    ) -> None:
        super().__init__(window)
        self._window = window
        self._dirs = dirs
        self._settings = settings
        self._runner = runner
        self._jobs = jobs
        self.open_wizards: list[QWidget] = []
        self.graft = GraftAction(runner, dirs.grafted_models, window)
        self.graft.failed.connect(lambda message: show_error(window, "Add the MTP head", message))

    # -- downloads and publishing -------------------------------------------------------------

    def open_download_wizard(
        self, repo_id: str = "", include: tuple[str, ...] = (), *, sidecar_repo: str = ""
    ) -> DownloadWizard:
        """The download wizard; with ``sidecar_repo`` it offers to graft that sidecar's head
        into the GGUFs it downloads."""
        wizard = DownloadWizard(
            self._runner,
            self._jobs,
            self._settings.current,
            repo_id,
            include,
            self._window,
            sidecar_repo=sidecar_repo,
            grafted_dir=self._dirs.grafted_models,
        )
        self._keep_open(wizard)
        return wizard

    def download_entry(self, entry: CatalogEntry) -> DownloadWizard:
        """A catalog entry's model; a GGUF with its sidecar offered for grafting."""
        is_gguf = entry.output_name.lower().endswith(".gguf")
        sidecar = entry.mtp_sidecar_repo if is_gguf and entry.mtp_sidecar_repo else ""
        return self.open_download_wizard(entry.hf_repo, (), sidecar_repo=sidecar)

    def download_sidecar(self, repo_id: str) -> DownloadWizard:
        return self.open_download_wizard(repo_id, (SIDECAR_FILE,))

    def publish_sidecar(self, entries: list[CatalogEntry], key: str = "") -> PublishWizard:
        wizard = PublishWizard(
            self._runner, self._jobs, self._settings.current, entries, key, self._window
        )
        self._keep_open(wizard)
        return wizard

    def close_wizards(self) -> None:
        for window in list(self.open_wizards):
            window.close()

    def _keep_open(self, window: QWidget) -> None:
        self.open_wizards.append(window)
        window.destroyed.connect(lambda: self.open_wizards.remove(window))
        window.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        window.show()

    # -- dialogs ------------------------------------------------------------------------------

    def open_settings(self) -> SettingsDialog:
        dialog = SettingsDialog(self._settings.store, self._settings.current, self._window)
        dialog.saved.connect(self._settings.adopt)
        dialog.open()
        return dialog

    def open_sign_in(self) -> SignInDialog:
        dialog = SignInDialog(self._settings.current.endpoint, self._window)
        dialog.open()
        return dialog

    # -- jobs on models -----------------------------------------------------------------------

    def add_head(self, model: Path, sidecar: Path) -> None:
        """Models page → "Add MTP head from sidecar": read the GGUF's header in the background,
        then the graft asks before it writes (a job in Jobs)."""
        run_in_background(
            lambda: replace(describe_model(model), sidecar=sidecar),
            self.graft.ask,
            lambda exc: show_error(self._window, "Add the MTP head", readable(exc)),
        )

    def get(self, job: GetJob) -> int:
        """Models page → Discover → Get: one recorded job (download, sidecar, graft)."""
        return self._runner.start(JobSpec(GET_KIND, job.plan.title, job.to_params()), job)
