"""The settings dialog and the Hub sign-in dialog.

Settings are validated before they are saved (a bad endpoint or a quantised KV cache without
flash attention is named, not stored). The load options (context, KV cache type, flash attention,
kept-state budget) are what the chat window loads a local model with. The token is
shown masked with where it comes from; signing in checks the token against the chosen Hub in the
background and writes the standard token file that every Hugging Face tool reads.
"""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.engine.errors import MtpStudioError
from app.engine.load_options import (
    FLASH_ATTENTION_MODES,
    KV_CACHE_TYPES,
    MAX_THREADS,
    load_options_problem,
)
from app.engine.runtime.core.cpu_threads import choose_threads
from app.engine.scratch import resolve_scratch
from app.engine.settings import (
    BACKENDS,
    DEFAULT_ENDPOINT,
    Settings,
    SettingsStore,
    TokenStatus,
    hf_hub_cache,
    sign_in,
    token_status,
)
from app.ui.background import run_in_background
from app.ui.errors import readable
from app.ui.look.tones import tone_style

AUTO_CONTEXT = 0  # the context box's lowest value reads "auto"
WINDOW_FIELD_NAMES = {
    "context_length": "Context window",
    "kv_cache_type": "KV cache type",
    "flash_attention": "Flash attention",
    "state_cache_mib": "Kept conversation states",
    "threads": "CPU threads",
}
"""How a problem with the load options names them here: as the form's labels do."""
MAX_CONTEXT_SETTING = 1 << 20
MAX_STATE_CACHE_MIB = 1 << 20


def token_summary(status: TokenStatus | None = None) -> str:
    status = status or token_status()
    if not status.signed_in:
        return "Not signed in — public repos only, publishing needs a token."
    origin = "the HF_TOKEN variable" if status.source == "HF_TOKEN" else str(status.token_file)
    return f"Signed in with {status.masked} (from {origin})"


class FolderField(QWidget):
    """A path line edit with a Browse… button; empty means the default shown as placeholder."""

    def __init__(self, value: str, default_hint: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.edit = QLineEdit(value)
        self.edit.setPlaceholderText(default_hint)
        self.edit.setMinimumWidth(360)
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.edit, 1)
        layout.addWidget(browse)

    def text(self) -> str:
        return self.edit.text().strip()

    def _browse(self) -> None:
        start = self.text() or self.edit.placeholderText()
        chosen = QFileDialog.getExistingDirectory(self, "Choose a folder", start)
        if chosen:
            self.edit.setText(chosen)


class SignInDialog(QDialog):
    """Paste a token; it is checked against the Hub before it replaces the stored one."""

    signed_in = Signal(str)

    def __init__(self, endpoint: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Sign in to the Hub")
        self._endpoint = endpoint
        self.token_edit = QLineEdit()
        self.token_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.token_edit.setPlaceholderText("hf_…")
        self.token_edit.setMinimumWidth(380)
        self.status_label = QLabel(
            f"Create an access token at <a href='{endpoint}/settings/tokens'>"
            f"{endpoint}/settings/tokens</a> (write access to publish). It is stored in the "
            "standard Hugging Face token file, shared with the <code>hf</code> command."
        )
        self.status_label.setOpenExternalLinks(True)
        self.status_label.setWordWrap(True)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Sign in")
        self.buttons.accepted.connect(self._check)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        form = QFormLayout()
        form.addRow("Hub", QLabel(endpoint))
        form.addRow("Access token", self.token_edit)
        layout.addLayout(form)
        layout.addWidget(self.status_label)
        layout.addWidget(self.buttons)

    def _check(self) -> None:
        token = self.token_edit.text()
        self.buttons.setEnabled(False)
        self.status_label.setStyleSheet("")
        self.status_label.setText(f"Checking the token with {self._endpoint}…")
        run_in_background(lambda: sign_in(token, self._endpoint), self._done, self._failed)

    def _done(self, user: object) -> None:
        self.token_edit.clear()
        self.signed_in.emit(str(user))
        self.accept()

    def _failed(self, exc: BaseException) -> None:
        self.buttons.setEnabled(True)
        self.status_label.setStyleSheet(tone_style("error"))
        self.status_label.setText(readable(exc))


class SettingsDialog(QDialog):
    """Edits :class:`Settings`; emits ``saved`` with the new settings after a successful save."""

    saved = Signal(object)

    def __init__(self, store: SettingsStore, settings: Settings, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self._store = store
        self._settings = settings
        self.endpoint_edit = QLineEdit(settings.hub_endpoint)
        self.endpoint_edit.setPlaceholderText(f"{DEFAULT_ENDPOINT} (or HF_ENDPOINT when set)")
        self.token_label = QLabel(token_summary())
        self.token_label.setWordWrap(True)
        sign_in_button = QPushButton("Sign in…")
        sign_in_button.clicked.connect(self._sign_in)
        token_row = QHBoxLayout()
        token_row.addWidget(self.token_label, 1)
        token_row.addWidget(sign_in_button)
        self.scratch_field = FolderField(settings.scratch_dir, str(resolve_scratch()))
        self.models_field = FolderField(settings.models_dir, str(hf_hub_cache()))
        self.collection_check = QCheckBox(
            'File published sidecars into the "MTP Sidecars" collection'
        )
        self.collection_check.setChecked(settings.file_in_collection)
        self.backend_combo = QComboBox()
        self.backend_combo.addItems(BACKENDS)
        self.backend_combo.setCurrentText(settings.default_backend)
        self._make_load_fields(settings)
        self.error_label = QLabel("")
        self.error_label.setStyleSheet(tone_style("error"))
        self.error_label.setWordWrap(True)

        form = QFormLayout()
        form.addRow("Hub endpoint", self.endpoint_edit)
        form.addRow("Token", token_row)
        form.addRow("Scratch folder", self.scratch_field)
        form.addRow("Models folder (HF cache)", self.models_field)
        form.addRow("Collections", self.collection_check)
        form.addRow("Default backend", self.backend_combo)
        form.addRow("Context window", self.context_spin)
        form.addRow("KV cache type", self.kv_type_combo)
        form.addRow("Flash attention", self.flash_combo)
        form.addRow("Kept conversation states", self.state_cache_spin)
        form.addRow("CPU threads", self.threads_spin)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self._save)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.error_label)
        layout.addWidget(buttons)

    def _make_load_fields(self, settings: Settings) -> None:
        """The fields of how a local model is loaded (context, KV cache, threads…)."""
        self.context_spin = QSpinBox()
        self.context_spin.setRange(AUTO_CONTEXT, MAX_CONTEXT_SETTING)
        self.context_spin.setSingleStep(1024)
        self.context_spin.setSpecialValueText("auto: the largest that fits this machine")
        self.context_spin.setSuffix(" tokens")
        self.context_spin.setValue(settings.context_length)
        self.context_spin.setToolTip(
            "The context window a local model is loaded with; auto picks the largest that fits "
            "the machine's memory, up to the model's trained context"
        )
        self.kv_type_combo = QComboBox()
        self.kv_type_combo.addItems(KV_CACHE_TYPES)
        self.kv_type_combo.setCurrentText(settings.kv_cache_type)
        self.kv_type_combo.setToolTip(
            "q8_0 about halves the KV cache's memory, q4_0 about quarters it (with a small "
            "loss of quality); both need flash attention (llama.cpp models)"
        )
        self.flash_combo = QComboBox()
        self.flash_combo.addItems(FLASH_ATTENTION_MODES)
        self.flash_combo.setCurrentText(settings.flash_attention)
        self.state_cache_spin = QSpinBox()
        self.state_cache_spin.setRange(0, MAX_STATE_CACHE_MIB)
        self.state_cache_spin.setSingleStep(256)
        self.state_cache_spin.setSuffix(" MiB")
        self.state_cache_spin.setSpecialValueText("none")
        self.state_cache_spin.setValue(settings.state_cache_mib)
        self.state_cache_spin.setToolTip(
            "Memory for conversation states kept between replies, so a prompt that repeats an "
            "earlier one's beginning prefills only the rest"
        )
        self.threads_spin = QSpinBox()
        self.threads_spin.setRange(0, MAX_THREADS)
        default = choose_threads()
        self.threads_spin.setSpecialValueText(f"auto: {default.threads} ({default.reason})")
        self.threads_spin.setValue(settings.threads)
        self.threads_spin.setToolTip(
            "CPU threads a local llama.cpp model runs with; auto uses what llama.cpp's own tools "
            "use, one per physical performance core, or fewer for decoding steps where the "
            "model's step is timed faster on fewer when it loads (a small model, a busy machine)"
        )

    def edited_settings(self) -> Settings:
        return replace(
            self._settings,
            hub_endpoint=self.endpoint_edit.text().strip(),
            scratch_dir=self.scratch_field.text(),
            models_dir=self.models_field.text(),
            file_in_collection=self.collection_check.isChecked(),
            default_backend=self.backend_combo.currentText(),
            context_length=self.context_spin.value(),
            kv_cache_type=self.kv_type_combo.currentText(),
            flash_attention=self.flash_combo.currentText(),
            state_cache_mib=self.state_cache_spin.value(),
            threads=self.threads_spin.value(),
        )

    def _save(self) -> None:
        settings = self.edited_settings()
        problem = self._problem(settings)
        if problem is not None:
            self.error_label.setText(problem)
            return
        try:
            self._store.save(settings)
        except MtpStudioError as exc:
            self.error_label.setText(readable(exc))
            return
        self.saved.emit(settings)
        self.accept()

    @staticmethod
    def _problem(settings: Settings) -> str | None:
        """What is wrong with ``settings``, in the form's own words (the settings file's keys
        are what the engine's checks name)."""
        endpoint = settings.hub_endpoint
        if endpoint and not endpoint.startswith(("http://", "https://")):
            return (
                f"Hub endpoint {endpoint!r} is not a URL: use e.g. {DEFAULT_ENDPOINT}, or leave "
                "it empty for the default"
            )
        return load_options_problem(settings.load_options, WINDOW_FIELD_NAMES)

    def _sign_in(self) -> None:
        endpoint = self.edited_settings().endpoint
        dialog = SignInDialog(endpoint, self)
        dialog.signed_in.connect(lambda _user: self.token_label.setText(token_summary()))
        dialog.open()
