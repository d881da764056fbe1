"""The download wizard: pick a repo and files, check the destination, then watch it download.

For a GGUF repo the first page lists its quantisations (:mod:`app.ui.wizards.quant_picker`) and
preselects the largest that fits this machine; the download then fetches exactly that one (every
part of a split file, plus a separate head file) through the ``quant`` download parameter.

Planning (pin the commit, list the files) asks the Hub, so it runs in the background; the space
check is local. The download itself is a job in the monitor: closing the wizard leaves it
running, and pause, resume and cancel work from either place.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QRadioButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
    QWizard,
    QWizardPage,
)

from app.engine.download import CACHE, FOLDER, DownloadJob, DownloadRequest
from app.engine.download.plan import DownloadPlan, plan_download
from app.engine.download.space import existing_ancestor
from app.engine.errors import MtpStudioError
from app.engine.graft.download_job import DOWNLOAD_GRAFT_KIND, DownloadGraftJob
from app.engine.settings import Settings, app_dirs
from app.engine.store import JobSpec, JobState
from app.engine.units import format_bytes
from app.ui.background import run_in_background
from app.ui.errors import readable
from app.ui.jobs.model import JobTableModel
from app.ui.jobs.runner import JobRunner
from app.ui.look.tones import tone_style
from app.ui.settings_dialog import FolderField
from app.ui.wizards.quant_picker import QuantPicker
from app.ui.wizards.run_page import JobRunPage

SIDECAR_PATTERN = "mtp.safetensors"


class RepoPage(QWizardPage):
    def __init__(
        self,
        repo_id: str,
        include: tuple[str, ...],
        settings: Callable[[], Settings],
        sidecar_repo: str = "",
    ) -> None:
        super().__init__()
        self.setTitle("What to download")
        self.setSubTitle("A repo on the Hub, and which of its files.")
        self.repo_edit = QLineEdit(repo_id)
        self.repo_edit.setPlaceholderText("owner/name, e.g. Qwen/Qwen3.6-27B")
        self.revision_edit = QLineEdit("main")
        self.all_radio = QRadioButton("All files")
        self.pattern_radio = QRadioButton("Files matching")
        self.sidecar_radio = QRadioButton(f"Only the MTP sidecar ({SIDECAR_PATTERN})")
        self.quant_radio = QRadioButton("One quantisation:")
        self.quant_radio.setObjectName("quantRadio")
        self.quant_radio.hide()
        self.quant_picker = QuantPicker(settings)
        self.quant_picker.found.connect(self._quantisations_found)
        self.quant_picker.chosen.connect(self._quantisation_chosen)
        self.pattern_edit = QLineEdit()
        self.pattern_edit.setPlaceholderText("globs separated by spaces, e.g. *.json *.safetensors")
        group = QButtonGroup(self)
        for radio in (self.quant_radio, self.all_radio, self.pattern_radio, self.sidecar_radio):
            group.addButton(radio)
            radio.toggled.connect(self.completeChanged)
        if include == (SIDECAR_PATTERN,):
            self.sidecar_radio.setChecked(True)
        elif include:
            self.pattern_radio.setChecked(True)
            self.pattern_edit.setText(" ".join(include))
        else:
            self.all_radio.setChecked(True)
        self.repo_edit.textChanged.connect(self.completeChanged)
        self.repo_edit.textChanged.connect(self.quant_picker.repo_changed)
        self.pattern_edit.textChanged.connect(self.completeChanged)
        self.pattern_edit.textEdited.connect(lambda _text: self.pattern_radio.setChecked(True))
        self.sidecar_repo = sidecar_repo
        self.graft_check = QCheckBox(
            f"Also fetch the MTP sidecar ({sidecar_repo}) and add its head to each GGUF, "
            "so llama.cpp can draft with it"
        )
        self.graft_check.setObjectName("graftCheck")
        self.graft_check.setChecked(bool(sidecar_repo))
        self.graft_check.setVisible(bool(sidecar_repo))
        self.sidecar_radio.toggled.connect(lambda only: self.graft_check.setEnabled(not only))

        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("Repository"))
        layout.addWidget(self.repo_edit)
        layout.addWidget(QLabel("Revision (branch, tag or commit)"))
        layout.addWidget(self.revision_edit)
        layout.addSpacing(8)
        layout.addWidget(self.quant_radio)
        layout.addWidget(self.quant_picker, 1)
        layout.addWidget(self.all_radio)
        pattern_row = QHBoxLayout()
        pattern_row.addWidget(self.pattern_radio)
        pattern_row.addWidget(self.pattern_edit, 1)
        layout.addLayout(pattern_row)
        layout.addWidget(self.sidecar_radio)
        layout.addSpacing(8)
        layout.addWidget(self.graft_check)
        self.quant_picker.repo_changed(repo_id)

    def _quantisations_found(self, found: bool) -> None:
        self.quant_radio.setVisible(found)
        if found and self.all_radio.isChecked():  # all files of a GGUF repo: every quantisation
            self.quant_radio.setChecked(True)
        elif not found and self.quant_radio.isChecked():
            self.all_radio.setChecked(True)
        self.completeChanged.emit()

    def _quantisation_chosen(self) -> None:
        if self.quant_picker.selected_label():
            self.quant_radio.setChecked(True)
        self.completeChanged.emit()

    def quant(self) -> str:
        """The chosen quantisation's label, or "" when files are chosen otherwise."""
        return self.quant_picker.selected_label() if self.quant_radio.isChecked() else ""

    def include(self) -> tuple[str, ...]:
        if self.sidecar_radio.isChecked():
            return (SIDECAR_PATTERN,)
        if self.pattern_radio.isChecked():
            return tuple(self.pattern_edit.text().split())
        return ()  # all files, or one quantisation (see quant())

    def grafting(self) -> bool:
        """The model's GGUFs get the sidecar's head after the download."""
        wants_model = not self.sidecar_radio.isChecked()
        return bool(self.sidecar_repo) and wants_model and self.graft_check.isChecked()

    def isComplete(self) -> bool:
        owner, _, name = self.repo_edit.text().strip().partition("/")
        patterns_ok = not self.pattern_radio.isChecked() or bool(self.include())
        quant_ok = not self.quant_radio.isChecked() or bool(self.quant())
        return bool(owner and name) and patterns_ok and quant_ok


class PlanPage(QWizardPage):
    """Lists the files (asked of the Hub in the background) and checks the destination."""

    def __init__(self, wizard: DownloadWizard) -> None:
        super().__init__()
        self._wizard = wizard
        self.setTitle("Files and destination")
        self.setSubTitle("The files to fetch, where they go, and whether they fit.")
        self.setCommitPage(True)
        self.setButtonText(QWizard.WizardButton.CommitButton, "Download")
        self.plan: DownloadPlan | None = None
        self.plan_error = ""
        self.status_label = QLabel()
        self.status_label.setWordWrap(True)
        self.files_tree = QTreeWidget()
        self.files_tree.setHeaderLabels(["File", "Size"])
        self.files_tree.setRootIsDecorated(False)
        self.files_tree.setColumnWidth(0, 420)
        self.cache_radio = QRadioButton(
            f"The Hugging Face cache, shared with other tools ({wizard.settings.models_path()})"
        )
        self.folder_radio = QRadioButton("A folder of my choice:")
        self.folder_field = FolderField("", "choose a folder")
        group = QButtonGroup(self)
        group.addButton(self.cache_radio)
        group.addButton(self.folder_radio)
        self.cache_radio.setChecked(True)
        for radio in (self.cache_radio, self.folder_radio):
            radio.toggled.connect(self._check_space)
        self.folder_field.edit.textChanged.connect(self._check_space)
        self.folder_field.edit.textEdited.connect(lambda _t: self.folder_radio.setChecked(True))
        self.space_label = QLabel()
        self.space_label.setWordWrap(True)
        self.space_ok = False

        layout = QVBoxLayout(self)
        layout.addWidget(self.status_label)
        layout.addWidget(self.files_tree, 1)
        layout.addWidget(QLabel("Destination"))
        layout.addWidget(self.cache_radio)
        folder_row = QHBoxLayout()
        folder_row.addWidget(self.folder_radio)
        folder_row.addWidget(self.folder_field, 1)
        layout.addLayout(folder_row)
        layout.addWidget(self.space_label)

    def initializePage(self) -> None:
        self.plan = None
        self.plan_error = ""
        self.files_tree.clear()
        self.status_label.setStyleSheet("")
        self.status_label.setText(f"Asking {self._wizard.settings.endpoint} for the file list…")
        self.space_label.setText("")
        try:
            request = self._wizard.request()
        except MtpStudioError as exc:
            self._failed(exc)
            return
        run_in_background(lambda: plan_download(request), self._planned, self._failed)
        self.completeChanged.emit()

    def destination(self) -> tuple[str, str]:
        if self.folder_radio.isChecked():
            return self.folder_field.text(), FOLDER
        return str(self._wizard.settings.models_path()), CACHE

    def _planned(self, plan: object) -> None:
        assert isinstance(plan, DownloadPlan)
        self.plan = plan
        for file in plan.files:
            QTreeWidgetItem(self.files_tree, [file.path, format_bytes(file.size)])
        summary = (
            f"{plan.repo_id} at {plan.revision} (commit {plan.commit[:12]}): "
            f"{len(plan.files)} file(s), {format_bytes(plan.total_bytes)}"
        )
        if plan.refused:
            refused = "; ".join(entry.describe() for entry in plan.refused)
            summary += (
                f"\nRefused {len(plan.refused)} unsafe entr"
                f"{'y' if len(plan.refused) == 1 else 'ies'} the Hub listed (they will not be "
                f"downloaded, and the download will end as failed): {refused}"
            )
            self.status_label.setStyleSheet(tone_style("error"))
        self.status_label.setText(summary)
        self._check_space()

    def _failed(self, exc: BaseException) -> None:
        self.plan_error = readable(exc)
        self.status_label.setStyleSheet(tone_style("error"))
        self.status_label.setText(self.plan_error)
        self.completeChanged.emit()

    def _check_space(self) -> None:
        self.space_ok = False
        folder, _layout = self.destination()
        if self.plan is None:
            self.completeChanged.emit()
            return
        if not folder:
            self.space_label.setStyleSheet(tone_style("error"))
            self.space_label.setText("Choose a folder for the files.")
            self.completeChanged.emit()
            return
        where = existing_ancestor(Path(folder).expanduser())
        free = shutil.disk_usage(where).free
        needed = self.plan.total_bytes
        if self._wizard.repo_page.grafting():  # a grafted copy of each GGUF, plus the head
            needed += sum(file.size for file in self.plan.files if file.path.endswith(".gguf"))
        self.space_ok = needed <= free
        self.space_label.setStyleSheet("" if self.space_ok else tone_style("error"))
        verdict = "enough" if self.space_ok else "not enough: free some space or pick another place"
        self.space_label.setText(
            f"Needs up to {format_bytes(needed)}; {format_bytes(free)} free on {where} — {verdict}."
        )
        self.completeChanged.emit()

    def isComplete(self) -> bool:
        return self.plan is not None and self.space_ok


class RunPage(JobRunPage):
    """Starts the download when shown; the wizard can be closed while it runs."""

    def __init__(self, wizard: DownloadWizard) -> None:
        super().__init__(
            wizard.runner,
            wizard.jobs,
            title="Downloading",
            subtitle=(
                "You can close this window: the download goes on in Jobs, and an "
                "interrupted download continues from where it stopped."
            ),
            cancel_text="Cancel download",
        )
        self._wizard = wizard
        self.pause_button = QPushButton("Pause")
        self.pause_button.clicked.connect(self._toggle_pause)
        self.buttons.insertWidget(0, self.pause_button)
        wizard.runner.pause_changed.connect(self._pause_changed)

    def initializePage(self) -> None:
        folder, layout = self._wizard.plan_page.destination()
        request = self._wizard.request(destination=folder, layout=layout)
        if self._wizard.repo_page.grafting():
            sidecar = replace(
                request,
                repo_id=self._wizard.repo_page.sidecar_repo,
                include=(SIDECAR_PATTERN,),
                quant="",
            )
            job = DownloadGraftJob(request, sidecar, self._wizard.grafted_dir)
            self.start(JobSpec(DOWNLOAD_GRAFT_KIND, job.title, job.to_params()), job)
        else:
            self.start(
                JobSpec("download", request.title, request.to_params()), DownloadJob(request)
            )

    def _toggle_pause(self) -> None:
        if self.job_id is not None:
            self.runner.set_paused(self.job_id, not self.runner.is_paused(self.job_id))

    def _pause_changed(self, job_id: int, paused: bool) -> None:
        if job_id == self.job_id:
            self.pause_button.setText("Resume" if paused else "Pause")

    def job_finished(self, state: str, message: str) -> None:
        self.pause_button.setEnabled(False)
        if state == JobState.SUCCEEDED and self._wizard.repo_page.grafting():
            self.setSubTitle(
                "Done. The files are verified and in place, and the GGUF has its MTP head: "
                "open it from the chat window."
            )
        elif state == JobState.SUCCEEDED:
            self.setSubTitle("Done. The files are verified and in place.")
        else:
            self.setSubTitle(f"The download {state}. Retry it from the Jobs page to continue.")


class DownloadWizard(QWizard):
    def __init__(
        self,
        runner: JobRunner,
        jobs: JobTableModel,
        settings: Settings,
        repo_id: str = "",
        include: tuple[str, ...] = (),
        parent: QWidget | None = None,
        *,
        sidecar_repo: str = "",
        grafted_dir: Path | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Download")
        self.setWizardStyle(QWizard.WizardStyle.ModernStyle)
        self.setOption(QWizard.WizardOption.NoBackButtonOnLastPage, True)
        self.setOption(QWizard.WizardOption.NoCancelButtonOnLastPage, True)
        self.runner = runner
        self.jobs = jobs
        self.settings = settings
        self.grafted_dir = grafted_dir or app_dirs().grafted_models
        self.repo_page = RepoPage(repo_id, include, lambda: self.settings, sidecar_repo)
        self.plan_page = PlanPage(self)
        self.run_page = RunPage(self)
        for page in (self.repo_page, self.plan_page, self.run_page):
            self.addPage(page)
        self.resize(720, 560)

    def request(self, destination: str = "", layout: str = CACHE) -> DownloadRequest:
        return DownloadRequest(
            repo_id=self.repo_page.repo_edit.text().strip(),
            destination=destination or str(self.settings.models_path()),
            endpoint=self.settings.endpoint,
            revision=self.repo_page.revision_edit.text().strip() or "main",
            include=self.repo_page.include(),
            layout=layout,
            quant=self.repo_page.quant(),
        )
