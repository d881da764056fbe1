"""Whether the main window may close: unsaved catalog changes and running jobs are asked about.

Both questions are asked only when there is something to lose, and both say what happens to it:
the catalog can be saved first, and running jobs are recorded as interrupted (retried from the
Jobs page, downloads continuing where they stopped).
"""

from __future__ import annotations

from PySide6.QtWidgets import QMessageBox, QWidget

from app.ui.catalog.browser import CatalogBrowser
from app.ui.jobs.runner import JobRunner


def may_close(window: QWidget, browser: CatalogBrowser, runner: JobRunner) -> bool:
    """Ask what needs asking; False when the user chose to stay."""
    if browser.modified:
        answer = QMessageBox.question(
            window,
            "Unsaved catalog changes",
            "Save the catalog changes before quitting?",
            QMessageBox.StandardButton.Save
            | QMessageBox.StandardButton.Discard
            | QMessageBox.StandardButton.Cancel,
        )
        if answer == QMessageBox.StandardButton.Cancel:
            return False
        if answer == QMessageBox.StandardButton.Save and not browser.save():
            return False
    running = len(runner.running_jobs())
    if running:
        answer = QMessageBox.question(
            window,
            "Jobs are running",
            f"{running} job(s) are running. Quit anyway? They are marked interrupted and can "
            "be retried from the Jobs page; downloads continue where they stopped.",
        )
        return answer == QMessageBox.StandardButton.Yes
    return True
