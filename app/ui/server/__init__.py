"""The Server panel: run ``mtp-studio serve`` from the app and watch its requests.

:func:`install_server_panel` docks it in the main window (listed in the View menu, hidden until
the user opens it).
"""

from app.ui.server.panel import ServerPanel, install_server_panel

__all__ = ["ServerPanel", "install_server_panel"]
