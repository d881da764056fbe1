"""Readable errors in the GUI; tracebacks only in the log file.

An :class:`MtpStudioError` already says what is wrong and how to fix it, so its message is shown
with its fix in the window's words (:mod:`app.ui.wording`: "a larger Context window in Settings",
not "--ctx"). Anything else is a bug: the user gets one plain sentence and the path of the log
that holds the traceback (Help → Open logs folder), never the traceback itself.
"""

from __future__ import annotations

import logging
import sys
from types import TracebackType

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QMessageBox, QWidget

from app.engine.credentials import mask_credentials
from app.engine.errors import MtpStudioError
from app.ui.wording import in_window_words

log = logging.getLogger(__name__)
_shown: set[QMessageBox] = set()  # a box without a parent lives only as long as a reference


def readable(exc: BaseException) -> str:
    if isinstance(exc, MtpStudioError):
        return in_window_words(mask_credentials(str(exc)))
    return (
        f"Something unexpected went wrong ({type(exc).__name__}). The details are in the log "
        "file (Help → Open logs folder); please include it when you report the problem."
    )


def show_error(parent: QWidget | None, title: str, exc: BaseException) -> None:
    if not isinstance(exc, MtpStudioError):
        log.error("%s", title, exc_info=(type(exc), exc, exc.__traceback__))
    box = QMessageBox(QMessageBox.Icon.Warning, title, readable(exc), parent=parent)
    box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    _shown.add(box)
    box.finished.connect(lambda _result: _shown.discard(box))
    box.open()


def install_excepthook() -> None:
    """Route uncaught exceptions in Qt slots to the log and a readable dialog."""

    def hook(
        kind: type[BaseException], exc: BaseException, traceback: TracebackType | None
    ) -> None:
        log.error("uncaught exception", exc_info=(kind, exc, traceback))
        if QApplication.instance() is not None:
            show_error(QApplication.activeWindow(), "MTP Studio", exc)
        else:
            sys.__excepthook__(kind, exc, traceback)

    sys.excepthook = hook
