"""Opening chat windows in tests the way a user does, and waiting for what a user waits for."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt

from app.engine.settings import Settings, app_dirs
from app.ui.chat import ChatWindow
from app.ui.chat.transcript.message_widget import MessageWidget

LOAD_TIMEOUT_MS = 60_000
REPLY_TIMEOUT_MS = 120_000


class ChatDriver:
    """Opens chat windows (none of the bundled demo model unless asked), each owned by the test:
    at its end the window is closed, its worker stopped, and the window deleted."""

    def __init__(self, qtbot, empty_demo_dir: Path) -> None:
        self.qtbot = qtbot
        self._empty_demo_dir = empty_demo_dir
        self.windows: list[ChatWindow] = []  # kept alive until the test ends and closes them

    def open(self, *, with_demo: bool = False) -> ChatWindow:
        kwargs = {} if with_demo else {"demo_dir": self._empty_demo_dir}
        window = ChatWindow(app_dirs(), Settings(), **kwargs)
        self.qtbot.addWidget(window, before_close_func=self.close)
        window.show()
        self.windows.append(window)
        return window

    def load(self, window: ChatWindow, model: Path) -> None:
        window.open_model(model)
        self.qtbot.waitUntil(
            lambda: window.model_bar.state.text() == f"Ready: {model.name}", timeout=LOAD_TIMEOUT_MS
        )

    def send(self, window: ChatWindow, text: str) -> MessageWidget:
        """Type ``text``, press Send, and return the reply's widget once it starts."""
        window.composer.editor.setPlainText(text)
        self.qtbot.mouseClick(window.composer.send_button, Qt.MouseButton.LeftButton)
        assert window.streaming, window.banner.text()
        return window.transcript.messages[-1]

    def wait_reply(self, window: ChatWindow) -> MessageWidget:
        self.qtbot.waitUntil(lambda: not window.streaming, timeout=REPLY_TIMEOUT_MS)
        return window.transcript.messages[-1]

    def ask(self, window: ChatWindow, text: str) -> MessageWidget:
        self.send(window, text)
        return self.wait_reply(window)

    def close(self, window: ChatWindow) -> None:
        """Close ``window`` as a user does and wait until its worker has stopped."""
        window.close()
        self.qtbot.waitUntil(lambda: window.shut_down, timeout=LOAD_TIMEOUT_MS)
