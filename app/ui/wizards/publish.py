"""The publish wizard: entry → dry run → pre-flight → live run → result.

It drives the same engine job as ``mtp-studio publish`` and records it in the same history, so
closing the wizard leaves the publish running in the job monitor, and a failed one is retried
from there. Pre-flight runs in the background (it asks the Hub): token, write access, and
whether the sidecar is already published — then the user chooses to skip or publish again.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QButtonGroup,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWidget,
    QWizard,
    QWizardPage,
)

from app.engine.catalog import CatalogEntry
from app.engine.errors import MtpStudioError
from app.engine.hub.access import HubAccount, check_write_access, resolve_token
from app.engine.hub.job import publish_job_from_params, publish_job_spec
from app.engine.hub.publish import ALREADY_PUBLISHED, PublishOptions
from app.engine.jobs import JobEvent, StageEvent
from app.engine.publish_plan import ArtifactKind, PublishPlan, plan_publish
from app.engine.scratch import resolve_scratch
from app.engine.settings import Settings, token_status
from app.engine.store import JobState
from app.engine.units import format_bytes
from app.ui.background import run_in_background
from app.ui.errors import readable
from app.ui.jobs.model import JobTableModel
from app.ui.jobs.runner import JobRunner
from app.ui.look.tones import tone_style
from app.ui.wizards.run_page import JobRunPage

STAGES = (
    ("preflight", "Pre-flight: token and write access"),
    ("pin", "Pin the source commit"),
    ("detect", "Detect the MTP tensors"),
    ("extract", "Fetch their bytes and convert to BF16"),
    ("card", "Write the model card"),
    ("upload", "Upload mtp.safetensors and README.md"),
    ("collection", "File into the MTP Sidecars collection"),
    ("clean", "Remove the scratch copy"),
)
DONE, CURRENT, PENDING = "✔", "▶", "·"


@dataclass(frozen=True)
class Preflight:
    """What the Hub said before anything heavy starts."""

    account: HubAccount
    already_published: bool


def run_preflight(plan: PublishPlan, endpoint: str) -> Preflight:
    """Token present and valid, write access, already published? (runs off the GUI thread)."""
    from huggingface_hub import HfApi

    assert plan.mtp is not None
    api = HfApi(endpoint=endpoint, token=resolve_token())
    account = check_write_access(api, plan.mtp.sidecar_repo)
    published = account.sidecar_repo_exists and api.file_exists(
        plan.mtp.sidecar_repo, plan.mtp.filename
    )
    return Preflight(account, published)


class EntryPage(QWizardPage):
    def __init__(self, entries: list[CatalogEntry], chosen: str) -> None:
        super().__init__()
        self.setTitle("Catalog entry")
        self.setSubTitle("The sidecar is extracted from the entry's MTP source repo.")
        self.entries = {entry.key: entry for entry in entries}
        self.combo = QComboBox()
        for entry in entries:
            self.combo.addItem(entry.key, entry.key)
        self.combo.setCurrentIndex(max(self.combo.findData(chosen), 0))
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.combo.currentIndexChanged.connect(self._show)
        layout = QFormLayout(self)
        layout.addRow("Entry", self.combo)
        layout.addRow(self.summary)
        self._show()

    def entry(self) -> CatalogEntry | None:
        return self.entries.get(self.combo.currentData())

    def _show(self) -> None:
        entry = self.entry()
        if entry is None:
            self.summary.setText("No catalog entry has an MTP sidecar configured.")
        else:
            self.summary.setText(
                f"Source: <b>{entry.mtp_source_repo}</b><br>Sidecar repo: "
                f"<b>{entry.mtp_sidecar_repo}</b><br>Serves every quant of {entry.base_model}."
            )
        self.completeChanged.emit()

    def isComplete(self) -> bool:
        return self.entry() is not None


class DryRunPage(QWizardPage):
    """The four lines of the dry run, exactly as ``mtp-studio publish --dry-run`` prints them."""

    def __init__(self, wizard: PublishWizard) -> None:
        super().__init__()
        self._wizard = wizard
        self.setTitle("Dry run")
        self.setSubTitle("What will be published. Nothing has touched the network yet.")
        self.lines = QPlainTextEdit()
        self.lines.setReadOnly(True)
        self.lines.setFixedHeight(110)
        self.lines.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.error_label = QLabel()
        self.error_label.setWordWrap(True)
        self.error_label.setStyleSheet(tone_style("error"))
        layout = QVBoxLayout(self)
        layout.addWidget(self.lines)
        layout.addWidget(self.error_label)
        layout.addStretch(1)

    def initializePage(self) -> None:
        self._wizard.plan = None
        self.lines.clear()
        self.error_label.setText("")
        entry = self._wizard.entry_page.entry()
        assert entry is not None
        try:
            scratch = resolve_scratch(self._wizard.settings.scratch_dir or None)
            self._wizard.plan = plan_publish(entry, (ArtifactKind.MTP,), scratch)
        except MtpStudioError as exc:
            self.error_label.setText(str(exc))
        else:
            self.lines.setPlainText("\n".join(self._wizard.plan.describe()))
        self.completeChanged.emit()

    def isComplete(self) -> bool:
        return self._wizard.plan is not None


class PreflightPage(QWizardPage):
    def __init__(self, wizard: PublishWizard) -> None:
        super().__init__()
        self._wizard = wizard
        self.setTitle("Pre-flight")
        self.setSubTitle("Checked with the Hub before any heavy work.")
        self.setCommitPage(True)
        self.setButtonText(QWizard.WizardButton.CommitButton, "Publish")
        self.result: Preflight | None = None
        self.token_label = QLabel()
        self.access_label = QLabel()
        self.published_label = QLabel()
        for label in (self.token_label, self.access_label, self.published_label):
            label.setWordWrap(True)
            label.setTextFormat(Qt.TextFormat.RichText)
        self.skip_radio = QRadioButton("Skip: keep the published sidecar")
        self.force_radio = QRadioButton("Publish again (extract and upload a new commit)")
        group = QButtonGroup(self)
        group.addButton(self.skip_radio)
        group.addButton(self.force_radio)
        self.skip_radio.setChecked(True)
        self.sign_in_button = QPushButton("Sign in…")
        self.sign_in_button.clicked.connect(self._sign_in)
        self.retry_button = QPushButton("Check again")
        self.retry_button.clicked.connect(self.initializePage)
        buttons = QHBoxLayout()
        buttons.addWidget(self.sign_in_button)
        buttons.addWidget(self.retry_button)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        for widget in (self.token_label, self.access_label, self.published_label):
            layout.addWidget(widget)
        layout.addWidget(self.skip_radio)
        layout.addWidget(self.force_radio)
        layout.addLayout(buttons)
        layout.addStretch(1)

    def initializePage(self) -> None:
        self.result = None
        plan = self._wizard.plan
        assert plan is not None and plan.mtp is not None
        endpoint = self._wizard.settings.endpoint
        status = token_status()
        if status.signed_in:
            origin = "HF_TOKEN" if status.source == "HF_TOKEN" else str(status.token_file)
            self.token_label.setText(f"{DONE} Token found: {status.masked} (from {origin})")
        else:
            self.token_label.setText(
                f"<span style='{tone_style('error')}'>✖ No token: sign in to publish.</span>"
            )
        self.access_label.setText(f"{PENDING} Asking {endpoint} about write access…")
        self.published_label.setText("")
        for widget in (self.skip_radio, self.force_radio):
            widget.setVisible(False)
        self.sign_in_button.setVisible(not status.signed_in)
        self.retry_button.setEnabled(False)
        run_in_background(lambda: run_preflight(plan, endpoint), self._done, self._failed)
        self.completeChanged.emit()

    def force(self) -> bool:
        return (
            self.result is not None
            and self.result.already_published
            and (self.force_radio.isChecked())
        )

    def _done(self, outcome: object) -> None:
        assert isinstance(outcome, Preflight)
        plan = self._wizard.plan
        assert plan is not None and plan.mtp is not None
        self.result = outcome
        self.retry_button.setEnabled(True)
        exists = "exists" if outcome.account.sidecar_repo_exists else "will be created"
        self.access_label.setText(
            f"{DONE} {html.escape(outcome.account.name)} may write to "
            f"{html.escape(plan.mtp.sidecar_repo)} ({exists})"
        )
        if outcome.already_published:
            self.published_label.setText(
                f"⚠ Already published: hf://{plan.mtp.sidecar_repo}/{plan.mtp.filename} exists."
            )
            self.skip_radio.setVisible(True)
            self.force_radio.setVisible(True)
        else:
            self.published_label.setText(f"{DONE} Not published yet")
        self.completeChanged.emit()

    def _failed(self, exc: BaseException) -> None:
        self.retry_button.setEnabled(True)
        self.access_label.setText(
            f"<span style='{tone_style('error')}'>✖ {html.escape(readable(exc))}</span>"
        )
        self.sign_in_button.setVisible(True)
        self.completeChanged.emit()

    def _sign_in(self) -> None:
        from app.ui.settings_dialog import SignInDialog

        dialog = SignInDialog(self._wizard.settings.endpoint, self)
        dialog.signed_in.connect(lambda _user: self.initializePage())
        dialog.open()

    def isComplete(self) -> bool:
        return self.result is not None


class RunPage(JobRunPage):
    """The job's stages, progress (bytes, speed, time left) and log; Cancel at any time."""

    def __init__(self, wizard: PublishWizard) -> None:
        self.stages = QListWidget()
        super().__init__(
            wizard.runner,
            wizard.jobs,
            title="Publishing",
            subtitle=(
                "You can close this window: the publish goes on in Jobs. A failure "
                "after extraction keeps the sidecar in scratch, and a retry reuses it."
            ),
            cancel_text="Cancel publish",
            above_progress=self.stages,
        )
        self._wizard = wizard
        self._show_stage("")
        rows = self.stages.sizeHintForRow(0) * len(STAGES)
        self.stages.setFixedHeight(rows + 2 * self.stages.frameWidth() + 4)

    def initializePage(self) -> None:
        plan = self._wizard.plan
        assert plan is not None and plan.mtp is not None
        settings = self._wizard.settings
        options = PublishOptions(
            force=self._wizard.preflight_page.force(),
            endpoint=settings.endpoint,
            file_in_collection=settings.file_in_collection,
        )
        spec = publish_job_spec(plan.mtp, options)
        self._show_stage("")
        self.start(spec, publish_job_from_params(spec.params))

    def _show_stage(self, current: str, all_done: bool = False) -> None:
        names = [name for name, _label in STAGES]
        reached = len(names) if all_done else names.index(current) if current in names else -1
        self.stages.clear()
        for position, (_name, label) in enumerate(STAGES):
            mark = DONE if position < reached else CURRENT if position == reached else PENDING
            QListWidgetItem(f"{mark}  {label}", self.stages)

    def job_events(self, events: list[JobEvent]) -> None:
        for event in events:
            if isinstance(event, StageEvent):
                self._show_stage(event.stage)

    def job_finished(self, state: str, message: str) -> None:
        if state == JobState.SUCCEEDED:
            self._show_stage("", all_done=True)


class ResultPage(QWizardPage):
    def __init__(self, wizard: PublishWizard) -> None:
        super().__init__()
        self._wizard = wizard
        self.setTitle("Result")
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setOpenExternalLinks(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addStretch(1)

    def initializePage(self) -> None:
        run = self._wizard.run_page
        if run.state != JobState.SUCCEEDED:
            self.setSubTitle(f"The publish {run.state}.")
            self.summary.setText(
                f"<p style='{tone_style('error')}'>{html.escape(run.message)}</p>"
                "<p>Retry it from the Jobs page (Ctrl+5) once the cause is fixed.</p>"
            )
            return
        row = self._wizard.jobs.job(run.job_id or -1)
        result = (row.result if row else None) or {}
        self.summary.setText(result_html(result))
        already = result.get("outcome") == ALREADY_PUBLISHED
        self.setSubTitle("Already published: nothing was uploaded." if already else "Published.")


def _link(url: str, text: str = "") -> str:
    return f"<a href='{html.escape(url)}'>{html.escape(text or url)}</a>" if url else "—"


def result_html(result: dict) -> str:
    """The result page's body from the job's result summary."""
    rows = [
        ("Sidecar repo", _link(result.get("repo_url", ""), result.get("sidecar_repo", ""))),
        ("File", _link(result.get("file_url", ""))),
        ("Commit", _link(result.get("commit_url", ""))),
        ("Collection", _link(result.get("collection_url", ""))),
    ]
    if result.get("outcome") != ALREADY_PUBLISHED:
        rows += [
            ("Source", f"{result.get('source_repo')} @ {str(result.get('source_sha'))[:12]}"),
            (
                "Heads",
                f"{result.get('tensor_count')} tensors, layout {result.get('layout')}, "
                f"layers {result.get('layer_indices')}",
            ),
            (
                "Fetched",
                f"{format_bytes(result.get('bytes_fetched', 0))} for "
                f"{format_bytes(result.get('bytes_needed', 0))} of MTP tensors",
            ),
            (
                "Sidecar",
                f"{format_bytes(result.get('sidecar_bytes', 0))}, uploaded "
                f"{format_bytes(result.get('bytes_uploaded', 0))}",
            ),
            (
                "Time",
                f"extract {result.get('seconds_extract', 0):.1f} s, upload "
                f"{result.get('seconds_upload', 0):.1f} s, total "
                f"{result.get('seconds_total', 0):.1f} s",
            ),
        ]
    body = "".join(
        f"<tr><td><b>{name}</b>&nbsp;&nbsp;</td><td>{value}</td></tr>" for name, value in rows
    )
    warnings = "".join(f"<li>{html.escape(w)}</li>" for w in result.get("warnings", []))
    return f"<table>{body}</table>" + (
        f"<p><b>Warnings</b></p><ul>{warnings}</ul>" if warnings else ""
    )


class PublishWizard(QWizard):
    def __init__(
        self,
        runner: JobRunner,
        jobs: JobTableModel,
        settings: Settings,
        entries: list[CatalogEntry],
        chosen: str = "",
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Publish MTP sidecar")
        self.setWizardStyle(QWizard.WizardStyle.ModernStyle)
        self.setOption(QWizard.WizardOption.NoBackButtonOnLastPage, True)
        self.setOption(QWizard.WizardOption.NoCancelButtonOnLastPage, True)
        self.runner = runner
        self.jobs = jobs
        self.settings = settings
        self.plan: PublishPlan | None = None
        with_sidecar = [entry for entry in entries if entry.has_sidecar]
        self.entry_page = EntryPage(with_sidecar, chosen)
        self.dry_run_page = DryRunPage(self)
        self.preflight_page = PreflightPage(self)
        self.run_page = RunPage(self)
        self.result_page = ResultPage(self)
        for page in (
            self.entry_page,
            self.dry_run_page,
            self.preflight_page,
            self.run_page,
            self.result_page,
        ):
            self.addPage(page)
        self.resize(760, 620)
