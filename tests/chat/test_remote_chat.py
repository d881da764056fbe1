"""The chat window against real remote servers: "Connect to a server…", saved connections with
their keys kept secret, replies streamed from the server with the acceptance it reports, Stop,
and readable errors for a wrong key, an unknown model and an unreachable URL.

The server is a real ``mtp-studio serve`` (the bundled demo model, MTP depth 2, an API key) in
another process; the llama-server test runs the real llama.cpp ``llama-server`` on the demo GGUF
with ``--spec-type draft-mtp`` when its binary has been built on this machine.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.engine.chat.connections import CONNECTIONS_FILE_NAME, ConnectionStore
from app.engine.chat.conversation import MessageState
from app.engine.chat.remote_reply import NOT_REPORTED
from app.engine.remote.acceptance import LLAMA_SERVER, MTP_STUDIO
from app.engine.settings import Settings, SettingsStore, app_dirs
from app.ui.chat import ChatWindow
from app.ui.chat.controls.remote_controls import REMOTE_COMPARE_REASON, REMOTE_MTP_REASON
from app.ui.chat.widgets.connect_dialog import ConnectDialog
from app.ui.chat.widgets.model_bar import CONNECT_ITEM
from app.ui.logsetup import configure_logging
from tests.ports import free_port
from tests.server.server_process import ServerProcess, running_server

pytestmark = pytest.mark.slow

KEY = "sk-remote-chat-secret-0123456789"
CONNECT_TIMEOUT_MS = 30_000


@pytest.fixture(scope="module")
def remote() -> Iterator[ServerProcess]:
    with running_server("--api-key", KEY, "--mtp-depth", "2") as process:
        yield process


@pytest.fixture
def log_file() -> Iterator[Path]:
    """The app's real log file, at DEBUG so any library that logs a request header would show."""
    path = configure_logging(app_dirs().logs)
    root = logging.getLogger()
    root.setLevel(logging.DEBUG)
    yield path
    for handler in list(root.handlers):
        if getattr(handler, "baseFilename", None) == str(path):
            root.removeHandler(handler)
            handler.close()
    root.setLevel(logging.WARNING)


def connect(chat, window: ChatWindow, url: str, key: str, name: str, model: str = "") -> None:
    """Fill in "Connect to a server…" as a user does and press "Save and connect"."""
    dialog = window.ask_connect()
    dialog.url.setText(url)
    dialog.api_key.setText(key)
    dialog.model.setEditText(model)
    dialog.name.setText(name)
    chat.qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)


def wait_state(chat, window: ChatWindow, prefix: str) -> None:
    chat.qtbot.waitUntil(
        lambda: window.model_bar.state.text().startswith(prefix), timeout=CONNECT_TIMEOUT_MS
    )


def picker_items(window: ChatWindow) -> list[str]:
    picker = window.model_bar.picker
    return [picker.itemText(i) for i in range(picker.count())]


def files_under(root: Path) -> Iterator[Path]:
    return (path for path in root.rglob("*") if path.is_file())


def test_connect_stream_with_acceptance_and_the_key_stays_secret(
    chat, remote: ServerProcess, log_file: Path, tmp_path: Path
) -> None:
    SettingsStore(app_dirs().settings_file).save(Settings())
    window = chat.open()
    assert CONNECT_ITEM in picker_items(window)

    dialog = window.ask_connect()
    assert dialog.api_key.echoMode() == dialog.api_key.EchoMode.Password
    dialog.url.setText(remote.base_url)
    dialog.api_key.setText(KEY)
    chat.qtbot.mouseClick(dialog.list_models_button, Qt.MouseButton.LeftButton)
    chat.qtbot.waitUntil(lambda: dialog.model.count() > 0, timeout=CONNECT_TIMEOUT_MS)
    served = dialog.model.itemText(0)
    assert served == "demo-mtp" and dialog.model.currentText() == served
    dialog.name.setText("lab")
    chat.qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    wait_state(chat, window, "Ready: demo-mtp on lab")
    assert dialog.isHidden() and dialog.api_key.text() == ""  # the key does not wait there

    assert window.model_bar.picker.currentText() == "Remote: lab"
    assert f"remote: {remote.base_url}" in window.model_bar.backend.text()
    panel = window.settings_panel
    assert not panel.mtp_depth.isEnabled() and REMOTE_MTP_REASON in panel.mtp_depth.toolTip()
    assert not panel.accept.isEnabled() and REMOTE_MTP_REASON in panel.accept.toolTip()
    assert not window.composer.compare_button.isEnabled()
    assert window.composer.compare_button.toolTip() == REMOTE_COMPARE_REASON

    panel.max_tokens.setValue(32)
    reply = chat.send(window, "Hello")
    pieces: list[str] = []
    window.replies.ticket.chunk.connect(lambda text, _stats: pieces.append(text))
    reply = chat.wait_reply(window)
    assert len(pieces) > 1 and reply.text == "".join(pieces)
    figures = reply.figures.text()
    assert "tokens" in figures and "tok/s" in figures and "TTFT" in figures, figures
    # The decode speed is the one the server measured and logged for this request.
    served = remote.wait_for_line(r"POST /v1/chat/completions 200 .* tok/s")
    speed = re.search(r"([\d.]+) tok/s", served).group(1)
    assert f"{speed} tok/s" in figures, (figures, served)
    assert figures.endswith(("end of turn", "max tokens")), figures
    notice = reply.notice.text()
    assert notice.startswith(f"remote: {remote.base_url} · acceptance "), notice
    assert "by depth" in notice and f"{MTP_STUDIO})" in notice, notice
    assert "demo-mtp (remote: lab)" in reply.header.text()
    # Compare stays off after the reply, when the composer re-enables its buttons.
    assert not window.composer.compare_button.isEnabled()

    stored = window.store.conversation(window.conversation_control.current.id).messages[-1]
    assert stored.content == reply.text and stored.note == notice
    exported = window.export_to(window.conversation_control.current.id, tmp_path / "remote.md")
    markdown = exported.read_text(encoding="utf-8")
    assert reply.text in markdown and notice in markdown

    # Regenerate answers again from the server.
    chat.qtbot.mouseClick(reply.regenerate_button, Qt.MouseButton.LeftButton)
    again = chat.wait_reply(window)
    assert again.notice.text().startswith(f"remote: {remote.base_url} · acceptance ")
    regenerated = window.store.conversation(window.conversation_control.current.id).messages[-1]
    assert regenerated.id != stored.id and regenerated.content == again.text
    # "random" seed: each reply is sent with its own drawn seed, which the history keeps.
    assert stored.seed is not None and regenerated.seed is not None
    assert stored.seed != regenerated.seed
    chat.close(window)

    # Saved: listed after reopening, masked everywhere it is shown, the key only in its file.
    reopened = chat.open()
    assert "Remote: lab" in picker_items(reopened)
    index = picker_items(reopened).index("Remote: lab")
    tooltip = reopened.model_bar.picker.itemData(index, Qt.ItemDataRole.ToolTipRole)
    assert tooltip == f"{remote.base_url} · key …{KEY[-4:]}"
    listed = reopened.ask_connect().saved.item(0).text()
    assert listed == f"lab — {remote.base_url} · demo-mtp · key …{KEY[-4:]}"
    connections_file = app_dirs().config / CONNECTIONS_FILE_NAME
    assert stat.S_IMODE(connections_file.stat().st_mode) == 0o600
    assert ConnectionStore(connections_file).load()[0].api_key == KEY
    assert repr(ConnectionStore(connections_file).load()[0]).count(KEY) == 0
    chat.close(reopened)
    home = Path(os.environ["MTP_STUDIO_HOME"])
    assert app_dirs().settings_file.is_file() and log_file.is_file()
    assert remote.base_url in log_file.read_text(encoding="utf-8")  # requests were logged
    for path in files_under(home):
        if path != connections_file:
            assert KEY.encode() not in path.read_bytes(), f"the API key is in {path}"


def test_stop_mid_reply_cancels_the_server_and_keeps_the_text(chat, remote: ServerProcess) -> None:
    window = chat.open()
    connect(chat, window, remote.base_url, KEY, "lab")
    wait_state(chat, window, "Ready: demo-mtp on lab")
    window.settings_panel.max_tokens.setValue(4000)
    window.settings_panel.temperature.setValue(0.0)  # greedy: the demo model then talks on
    reply = chat.send(window, "Write a long story about a dragon.")
    chat.qtbot.waitUntil(lambda: len(reply.text) > 20, timeout=CONNECT_TIMEOUT_MS)
    # Saved while it streams, as local replies are: the history already holds the partial text.
    conversation = window.conversation_control.current.id
    chat.qtbot.waitUntil(
        lambda: bool(window.store.conversation(conversation).messages[-1].content),
        timeout=CONNECT_TIMEOUT_MS,
    )
    partial = window.store.conversation(conversation).messages[-1]
    assert partial.state is MessageState.STREAMING and window.streaming
    chat.qtbot.mouseClick(window.composer.stop_button, Qt.MouseButton.LeftButton)
    reply = chat.wait_reply(window)
    assert reply.figures.text().split("\n")[0].endswith("stopped")
    remote.wait_for_line(r"POST /v1/chat/completions 499 .*client disconnected")
    stored = window.store.conversation(window.conversation_control.current.id).messages[-1]
    assert stored.finish_reason == "cancelled" and stored.content == reply.text
    assert len(stored.content) > 20 and stored.stats.generated_tokens < 4000


def test_wrong_key_unknown_model_and_unreachable_url_keep_the_conversation(
    chat, remote: ServerProcess
) -> None:
    window = chat.open()
    connect(chat, window, remote.base_url, KEY, "lab")
    wait_state(chat, window, "Ready:")
    window.settings_panel.max_tokens.setValue(8)
    first = chat.ask(window, "Hi")
    conversation = window.conversation_control.current.id

    connect(chat, window, remote.base_url, "sk-wrong-key-0000", "wrong key")
    wait_state(chat, window, "Could not connect to wrong key")
    banner = window.banner.text()
    assert window.banner.isVisible() and "answered 401" in banner, banner
    assert "sk-wrong-key-0000" not in banner

    connect(chat, window, remote.base_url, KEY, "no such model", model="no-such-model")
    wait_state(chat, window, "Could not connect to no such model")
    assert "does not serve the model 'no-such-model' (it serves demo-mtp)" in window.banner.text()

    closed_port = free_port()  # nothing listens there
    connect(chat, window, f"http://127.0.0.1:{closed_port}/v1", "", "gone")
    wait_state(chat, window, "Could not connect to gone")
    assert "cannot reach" in window.banner.text(), window.banner.text()

    window.composer.editor.setPlainText("Are you there?")
    chat.qtbot.mouseClick(window.composer.send_button, Qt.MouseButton.LeftButton)
    assert not window.streaming and window.banner.isVisible()
    assert window.conversation_control.current.id == conversation
    assert [m.text for m in window.transcript.messages] == ["Hi", first.text]

    # Removing a connection takes it out of the picker and the file.
    dialog: ConnectDialog = window.ask_connect()
    names = [dialog.saved.item(i).text().split(" — ")[0] for i in range(dialog.saved.count())]
    assert names == ["lab", "wrong key", "no such model", "gone"]
    dialog.saved.setCurrentRow(names.index("gone"))
    chat.qtbot.mouseClick(dialog.remove_button, Qt.MouseButton.LeftButton)
    assert "Remote: gone" not in picker_items(window)
    assert [c.name for c in window.connection_store.load()] == ["lab", "wrong key", "no such model"]
    assert window.model_bar.state.text() == "No model loaded"


def test_choosing_a_local_model_again_gives_back_the_local_controls(
    chat, remote: ServerProcess, tiny_gguf: Path
) -> None:
    window = chat.open()
    connect(chat, window, remote.base_url, KEY, "lab")
    wait_state(chat, window, "Ready:")
    assert not window.settings_panel.mtp_enabled.isEnabled()
    chat.load(window, tiny_gguf)
    assert "remote:" not in window.model_bar.backend.text()
    assert window.settings_panel.mtp_enabled.isEnabled()
    assert window.settings_panel.mtp_depth.isEnabled()
    assert REMOTE_MTP_REASON not in window.settings_panel.mtp_depth.toolTip()
    assert window.composer.compare_button.isEnabled()
    assert window.composer.compare_button.toolTip() != REMOTE_COMPARE_REASON
    reply = chat.ask(window, "Hi")
    assert not reply.notice.text().startswith("remote:")
    assert "Remote: lab" in picker_items(window)


def test_llama_server_replies_with_its_timings_acceptance(
    chat, mtp_llama_server: ServerProcess
) -> None:
    llama_server = mtp_llama_server.base_url
    window = chat.open()
    connect(chat, window, llama_server, "", "llama")
    wait_state(chat, window, "Ready:")
    window.settings_panel.max_tokens.setValue(48)
    reply = chat.ask(window, "Write a story.")
    assert reply.text and "tok/s" in reply.figures.text()
    notice = reply.notice.text()
    assert notice.startswith(f"remote: {llama_server} · acceptance "), notice
    assert f"{LLAMA_SERVER})" in notice and NOT_REPORTED not in notice
