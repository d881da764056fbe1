"""Chatting with a model on a server: the saved connections, "Connect to a server…", and the
check that a chosen server answers before replies go to it.

Connections are saved by :class:`ConnectionStore` (its file readable by the user only, the key never
shown in full) and listed in the model bar's picker next to the local models. Choosing one stops the
local worker, switches the MTP controls off (a server decides speculative decoding with its own
launch flags, see :mod:`app.ui.chat.controls.remote_controls`) and checks the server in the
background through the :class:`RemoteBridge`; a server that cannot be reached, refuses the key or
does not serve the model says so in the banner.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QWidget

from app.engine.chat.connections import Connection, ConnectionStore
from app.engine.errors import MtpStudioError
from app.ui.chat.bridges.remote_bridge import RemoteBridge
from app.ui.chat.bridges.reply_target import ReplyTarget
from app.ui.chat.bridges.runtime_bridge import RuntimeBridge
from app.ui.chat.controls.remote_controls import RemoteControls
from app.ui.chat.transcript.column import TranscriptView
from app.ui.chat.widgets.banner import Banner
from app.ui.chat.widgets.connect_dialog import ConnectDialog
from app.ui.chat.widgets.model_bar import ModelBar


class RemoteConnections(QObject):
    """Lists, adds, removes and chooses the servers the chat window (``parent``) can use."""

    def __init__(
        self,
        parent: QWidget,
        *,
        store: ConnectionStore,
        bridge: RuntimeBridge,
        remote_bridge: RemoteBridge,
        target: ReplyTarget,
        bar: ModelBar,
        banner: Banner,
        transcript: TranscriptView,
        remote_controls: RemoteControls,
        is_closed: Callable[[], bool],
    ) -> None:
        super().__init__(parent)
        self._parent = parent
        self._store = store
        self._bridge = bridge
        self._remote_bridge = remote_bridge
        self._target = target
        self._bar = bar
        self._banner = banner
        self._transcript = transcript
        self._remote_controls = remote_controls
        self._is_closed = is_closed
        self.dialog: ConnectDialog | None = None

        bar.remote_chosen.connect(self.choose_remote)
        bar.connect_requested.connect(self.ask_connect)
        remote_bridge.connected.connect(self._on_connected)
        remote_bridge.connect_failed.connect(self._on_failed)

    def ask_connect(self) -> ConnectDialog:
        """Open “Connect to a server…” (add, use or remove saved connections)."""
        if self.dialog is None:
            self.dialog = ConnectDialog(self._store, self._parent)
            self.dialog.chosen.connect(self._on_chosen)
            self.dialog.removed.connect(self._on_removed)
        self.dialog.refresh()
        self.dialog.open()
        return self.dialog

    def show_connections(self) -> None:
        """List the saved connections in the picker (a broken file says why in the banner)."""
        try:
            connections = self._store.load()
        except MtpStudioError as exc:
            connections = []
            self._banner.show_text(str(exc))
        self._bar.set_connections(connections, self._target.remote)

    def _on_chosen(self, connection: Connection) -> None:
        self.show_connections()
        self.choose_remote(connection)

    def _on_removed(self, name: str) -> None:
        remote = self._target.remote
        if remote is not None and remote.name == name:
            self._target.remote, self._target.state = None, "none"
            self._remote_controls.use_local()
            self._bar.set_load_state("No model loaded")
        self.show_connections()

    def choose_remote(self, connection: Connection) -> None:
        """Send replies to ``connection``'s server; it is checked (in the background) first."""
        self._bridge.stop()
        self._target.use_remote(connection)
        self._transcript.set_speed_model("", None, "")
        self._banner.hide()
        self._bar.set_connections(self._bar.connections, connection)
        self._bar.show_remote(connection, None)
        self._remote_controls.use_remote()
        self._target.show_state(self._bar)
        self._remote_bridge.use(connection)

    def _on_connected(self, connection: Connection, model: str) -> None:
        if self._is_closed() or self._target.remote != connection:
            return
        self._target.state = "ready"
        self._target.remote_model = model
        self._bar.show_remote(connection, model)
        self._target.show_state(self._bar)

    def _on_failed(self, connection: Connection, message: str) -> None:
        if self._is_closed() or self._target.remote != connection:
            return
        self._target.state = "failed"
        self._target.show_state(self._bar)
        self._banner.show_text(message)
