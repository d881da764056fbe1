"""The main window's status bar: which Hub, which account, how many jobs run.

It reads the settings when it updates (never a copy), so a Hub endpoint saved in Settings shows
at once. Its labels may be cut short (the whole text is in their tooltips): a long Hub address
or account line must never make the window wider than a small screen.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QLabel, QSizePolicy, QStatusBar

from app.engine.credentials import mask_credentials
from app.engine.settings import Settings, token_status
from app.ui.jobs.runner import JobRunner
from app.ui.settings_dialog import token_summary


class StatusLine:
    def __init__(
        self, bar: QStatusBar, settings: Callable[[], Settings], runner: JobRunner
    ) -> None:
        self._settings = settings
        self._runner = runner
        self.endpoint_label = QLabel()
        self.token_label = QLabel()
        self.jobs_label = QLabel()
        for label in (self.endpoint_label, self.token_label):
            label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
            bar.addWidget(label, 1)
        bar.addPermanentWidget(self.jobs_label)

    def update(self) -> None:
        endpoint = f"Hub: {mask_credentials(self._settings().endpoint)}"
        self.endpoint_label.setText(endpoint)
        self.endpoint_label.setToolTip(endpoint)
        status = token_status()
        self.token_label.setText(
            f"Signed in: {status.masked}" if status.signed_in else "Not signed in"
        )
        self.token_label.setToolTip(token_summary(status))
        running = len(self._runner.running_jobs())
        self.jobs_label.setText(f"{running} job(s) running" if running else "No job running")
