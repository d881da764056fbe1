"""The main window's status bar: which Hub, which account, how many jobs run.

It reads the settings when it updates (never a copy), so a Hub endpoint saved in Settings shows
at once.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QLabel, QStatusBar

from app.engine.credentials import mask_credentials
from app.engine.settings import Settings
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
            bar.addWidget(label)
        bar.addPermanentWidget(self.jobs_label)

    def update(self) -> None:
        self.endpoint_label.setText(f"Hub: {mask_credentials(self._settings().endpoint)}")
        self.token_label.setText(token_summary())
        running = len(self._runner.running_jobs())
        self.jobs_label.setText(f"{running} job(s) running" if running else "No job running")
