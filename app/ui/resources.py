"""Icons from ``resources/`` (beside the ``app`` package, in the source tree and the wheel)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QIcon

RESOURCES = Path(__file__).resolve().parents[2] / "resources"


def app_icon() -> QIcon:
    """The application icon (an empty icon if the file is missing, which Qt tolerates)."""
    return QIcon(str(RESOURCES / "icons" / "mtp-studio.svg"))
