"""The Server panel: run ``mtp-studio serve`` from the app and watch its requests.

The main window shows it as its Server page.
"""

from app.ui.server.panel import ServerPanel

__all__ = ["ServerPanel"]
