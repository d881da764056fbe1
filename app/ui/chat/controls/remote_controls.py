"""Local-only chat controls while a remote server answers: disabled, each saying why.

MTP depth, the acceptance rule and "Compare plain vs MTP" drive the local runtime; a remote
server decides speculative decoding with its own launch flags, so these are switched off (with
a tooltip that says so) while a connection is in use and given back, tooltips included, when a
local model is chosen again.
"""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from app.ui.chat.widgets.composer import Composer
from app.ui.chat.widgets.settings_panel import SettingsPanel

REMOTE_MTP_REASON = (
    "a remote server runs the model: its MTP settings are set where it was started (e.g. vLLM's "
    "--speculative-config, llama-server's --spec-type draft-mtp)"
)
REMOTE_COMPARE_REASON = (
    "Compare runs the local model plain and with MTP; it is not available for a remote server"
)
REMOTE_TEMPLATE_TEXT = "The server formats the conversation with its own chat template."


class RemoteControls:
    """Switches the settings panel's MTP controls and the composer's Compare for remote use."""

    def __init__(self, panel: SettingsPanel, composer: Composer) -> None:
        self._panel = panel
        self._composer = composer
        widgets: tuple[QWidget, ...] = (panel.mtp_depth, panel.accept, composer.compare_button)
        self._tooltips = {widget: widget.toolTip() for widget in widgets}
        self.remote = False

    def use_remote(self) -> None:
        self.remote = True
        self._panel.set_model_capabilities(0, REMOTE_MTP_REASON, None)
        self._panel.template_label.setText(REMOTE_TEMPLATE_TEXT)
        self._panel.mtp_depth.setToolTip(f"Not used: {REMOTE_MTP_REASON}")
        self._panel.accept.setToolTip(f"Not used: {REMOTE_MTP_REASON}")
        self.apply()

    def use_local(self) -> None:
        """Give back the tooltips; the loaded model's capabilities re-enable the controls."""
        self.remote = False
        for widget, tooltip in self._tooltips.items():
            widget.setToolTip(tooltip)
        self._composer.compare_button.setEnabled(True)

    def apply(self) -> None:
        """Re-apply after the composer re-enabled its buttons (at the end of every reply)."""
        if self.remote:
            self._composer.compare_button.setEnabled(False)
            self._composer.compare_button.setToolTip(REMOTE_COMPARE_REASON)
