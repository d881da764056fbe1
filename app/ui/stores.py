"""Opening the app's two databases — job history and chat history — or a stand-in and why.

A database that cannot be opened (locked by another app instance, a newer version, a full disk)
must not stop the app from starting: this session then keeps its jobs or conversations in a
temporary file, and the reason is shown once. The main window and a chat window opened on its own
open them the same way, here.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from app.engine.chat.history import HISTORY_FILE_NAME, HistoryStore
from app.engine.errors import MtpStudioError
from app.engine.settings import AppDirs
from app.engine.store import JobStore


def open_job_store(dirs: AppDirs) -> tuple[JobStore, MtpStudioError | None]:
    """The job history, or a temporary one and why the real one could not be opened."""
    try:
        dirs.data.mkdir(parents=True, exist_ok=True)
        return JobStore(dirs.job_database), None
    except (MtpStudioError, OSError) as exc:
        fallback = Path(tempfile.mkdtemp(prefix="mtp-studio-jobs-")) / "jobs.sqlite3"
        return JobStore(fallback), MtpStudioError(
            f"{exc}\nThis session records its jobs in {fallback} instead."
        )


def open_history(path: Path) -> tuple[HistoryStore, str | None]:
    """The chat history, or a temporary one (and why) when it cannot be opened."""
    try:
        return HistoryStore(path), None
    except MtpStudioError as exc:
        fallback = Path(tempfile.mkdtemp(prefix="mtp-studio-chat-")) / HISTORY_FILE_NAME
        return HistoryStore(fallback), (
            f"{exc}\nThis session's conversations are kept in {fallback} instead and will not "
            "appear after a restart."
        )
