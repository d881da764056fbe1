"""The Server panel in the main window (Qt offscreen): opened from the View menu, it starts a real
``serve`` subprocess without blocking the window, shows and copies its URL, logs each request
with its tokens/s and acceptance, and stops the server."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import socket
import threading
from collections.abc import Iterator

import httpx2
import pytest
from openai import OpenAI
from PySide6.QtGui import QGuiApplication

from app.engine.settings import app_dirs
from app.ui.main_window import MainWindow
from tests.store.isolation import IsolatedHome, isolate

pytestmark = pytest.mark.slow

START_MS = 120_000


@pytest.fixture
def window(qtbot, monkeypatch: pytest.MonkeyPatch, tmp_path) -> Iterator[MainWindow]:
    home: IsolatedHome = isolate(monkeypatch, tmp_path / "home")
    assert home is not None
    main = MainWindow(app_dirs())
    main.show()
    yield main
    main.server_panel.shutdown()
    main.shutdown()
    main.close()
    main.deleteLater()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_panel_serves_logs_requests_and_stops(qtbot, window: MainWindow) -> None:
    view_menu = next(
        action.menu() for action in window.menuBar().actions() if action.text() == "&View"
    )
    page = next(action for action in view_menu.actions() if action.text() == "&Server")
    assert page.shortcut().toString() == "Ctrl+6"
    panel = window.server_panel
    assert not panel.isVisible()
    page.trigger()
    assert panel.isVisible() and window.current_page == "server"

    port = free_port()
    panel.port_spin.setValue(port)
    panel.start_button.click()
    assert not panel.start_button.isEnabled()  # returned at once: the model loads elsewhere
    qtbot.waitUntil(lambda: panel.url != "", timeout=START_MS)
    assert panel.url == f"http://127.0.0.1:{port}/v1" == panel.url_edit.text()
    panel.copy_button.click()
    assert QGuiApplication.clipboard().text() == panel.url

    replies: list[str] = []

    def ask() -> None:
        client = OpenAI(base_url=panel.url, api_key="unused", max_retries=0)
        reply = client.chat.completions.create(
            model="demo-mtp", messages=[{"role": "user", "content": "Hi"}], max_tokens=12
        )
        replies.append(reply.choices[0].message.content)

    caller = threading.Thread(target=ask)
    caller.start()
    qtbot.waitUntil(lambda: panel.requests_served == 1, timeout=60_000)
    caller.join()
    assert replies and replies[0]
    assert "POST /v1/chat/completions 200" in panel.log_view.toPlainText()
    figures = panel.figures_label.text()
    assert "1 replies" in figures and "tok/s" in figures and "acceptance by depth" in figures

    panel.stop_button.click()
    qtbot.waitUntil(lambda: not panel.running, timeout=30_000)
    assert panel.status_label.text() == "Stopped" and panel.url_edit.text() == ""
    with pytest.raises(httpx2.ConnectError):
        httpx2.get(f"http://127.0.0.1:{port}/health")


def test_a_missing_model_is_refused_without_starting(qtbot, window: MainWindow) -> None:
    panel = window.server_panel
    panel.model_edit.setText("/nowhere/model.gguf")
    panel.start_button.click()
    assert not panel.running and "No model at /nowhere/model.gguf" in panel.status_label.text()
