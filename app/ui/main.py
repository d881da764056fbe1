"""``mtp-studio`` with no arguments: start the desktop app.

Sets up the log file and the readable-error hook before any window exists, then opens the main
window on the saved (or bundled) catalog. Nothing here waits on the network, so the window opens
offline on a fresh machine.
"""

from __future__ import annotations

import logging
import sys

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from app import __version__
from app.engine.settings import app_dirs
from app.ui.errors import install_excepthook
from app.ui.logsetup import configure_logging
from app.ui.main_window import MainWindow
from app.ui.qt_libraries import check_desktop_libraries
from app.ui.resources import app_icon

log = logging.getLogger(__name__)
WINDOW_SHOWN = "main window shown"


def run() -> int:
    problem = check_desktop_libraries()
    if problem is not None:
        print(problem, file=sys.stderr)
        return 1
    dirs = app_dirs()
    configure_logging(dirs.logs)
    install_excepthook()
    app = QApplication.instance() or QApplication(sys.argv)
    app.setApplicationName("MTP Studio")
    app.setApplicationVersion(__version__)
    app.setOrganizationName("mtp-studio")
    icon = app_icon()
    if not icon.isNull():
        app.setWindowIcon(icon)
    window = MainWindow(dirs)
    window.show()
    QTimer.singleShot(0, lambda: log.info(WINDOW_SHOWN))  # the first event-loop turn: on screen
    return int(app.exec())
