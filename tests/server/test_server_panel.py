"""The Server panel in the main window (Qt offscreen): opened from the View menu, it starts a real
``serve`` subprocess without blocking the window, shows and copies both APIs' URLs and a client
snippet for each (the copied snippets run as they are), logs each request with its tokens/s and
acceptance, and stops the server."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import threading
from pathlib import Path

import httpx2
import pytest
from openai import OpenAI
from PySide6.QtGui import QGuiApplication

from app.ui.main_window import MainWindow
from tests.ports import free_port
from tests.server.long_reply import LONG

pytestmark = pytest.mark.slow

START_MS = 120_000


def test_panel_serves_logs_requests_and_stops(qtbot, main_window: MainWindow) -> None:
    view_menu = next(
        action.menu() for action in main_window.menuBar().actions() if action.text() == "&View"
    )
    page = next(action for action in view_menu.actions() if action.text() == "&Server")
    assert page.shortcut().toString() == "Ctrl+6"
    panel = main_window.server_panel
    assert not panel.isVisible()
    page.trigger()
    assert panel.isVisible() and main_window.current_page == "server"

    port = free_port()
    panel.port_spin.setValue(port)
    panel.start_button.click()
    assert not panel.start_button.isEnabled()  # returned at once: the model loads elsewhere
    qtbot.waitUntil(lambda: panel.url != "", timeout=START_MS)
    assert panel.url == f"http://127.0.0.1:{port}/v1" == panel.url_edit.text()
    panel.copy_button.click()
    assert QGuiApplication.clipboard().text() == panel.url
    assert panel.anthropic_url_edit.text() == f"http://127.0.0.1:{port}"
    panel.copy_anthropic_button.click()
    assert QGuiApplication.clipboard().text() == f"http://127.0.0.1:{port}"

    titles = [panel.snippet_choice.itemText(i) for i in range(panel.snippet_choice.count())]
    assert titles == [
        "curl (any shell)",
        "OpenAI (Python)",
        "Anthropic (Python)",
        "Claude Code (shell)",
    ]
    panel.snippet_choice.setCurrentText("curl (any shell)")  # runs in a plain shell as it is
    panel.copy_snippet_button.click()
    answered = subprocess.run(
        ["sh", "-c", QGuiApplication.clipboard().text()], capture_output=True, text=True, timeout=60
    )
    assert json.loads(answered.stdout)["choices"][0]["message"]["content"]
    for title in titles[1:3]:  # what a user pastes into a Python file runs as it is
        panel.snippet_choice.setCurrentText(title)
        panel.copy_snippet_button.click()
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(QGuiApplication.clipboard().text(), title, "exec"), {})
        assert printed.getvalue().strip(), f"the {title} snippet printed nothing"
        assert QGuiApplication.clipboard().text().startswith("# needs the ")  # and how to get it
    panel.snippet_choice.setCurrentText("Claude Code (shell)")
    assert f"export ANTHROPIC_BASE_URL=http://127.0.0.1:{port}\n" in (
        panel.snippet_view.toPlainText()
    )

    replies: list[str] = []

    def ask() -> None:
        client = OpenAI(base_url=panel.url, api_key="unused", max_retries=0)
        reply = client.chat.completions.create(
            model="demo-mtp", messages=[{"role": "user", "content": "Hi"}], max_tokens=12
        )
        replies.append(reply.choices[0].message.content)

    caller = threading.Thread(target=ask)
    caller.start()
    qtbot.waitUntil(lambda: panel.requests_served == 4, timeout=60_000)
    caller.join()
    assert replies and replies[0]
    assert "POST /v1/chat/completions 200" in panel.log_view.toPlainText()
    figures = panel.figures_label.text()
    assert "4 replies" in figures and "tok/s" in figures and "acceptance by depth" in figures

    panel.stop_button.click()
    qtbot.waitUntil(lambda: not panel.running, timeout=30_000)
    assert panel.status_label.text() == "Stopped" and panel.url_edit.text() == ""
    assert panel.anthropic_url_edit.text() == "" and not panel.copy_snippet_button.isEnabled()
    with pytest.raises(httpx2.ConnectError):
        httpx2.get(f"http://127.0.0.1:{port}/health")


def test_a_missing_model_is_refused_without_starting(qtbot, main_window: MainWindow) -> None:
    panel = main_window.server_panel
    panel.add_model(Path("/nowhere/model.gguf"))
    panel.choose_model(Path("/nowhere/model.gguf"))
    panel.start_button.click()
    assert not panel.running and "No model at /nowhere/model.gguf" in panel.status_label.text()


def test_the_page_shows_what_is_loaded_and_who_is_served_and_unloads(
    qtbot, main_window: MainWindow
) -> None:
    panel = main_window.server_panel
    assert panel.serves_library and panel.model_picker.currentText().startswith("Every model")
    panel.port_spin.setValue(free_port())
    panel.start_button.click()
    qtbot.waitUntil(lambda: panel.url != "", timeout=START_MS)
    view = panel.loaded_view
    assert "Serving 2 models on disk" in panel.status_label.text()  # the bundled demos
    client = OpenAI(base_url=panel.url, api_key="unused", max_retries=0, timeout=120)
    story = [{"role": "user", "content": "Write a long story about a dragon."}]
    streaming = client.chat.completions.create(
        model="demo-mtp",
        messages=story,
        max_tokens=3000,
        temperature=0,
        stream=True,
        response_format=LONG,  # still streaming while the page is read
    )
    next(iter(streaming))

    def clients_row() -> list[str]:
        table = view.clients_table
        return [table.item(0, column).text() for column in range(table.columnCount())]

    try:
        qtbot.waitUntil(lambda: view.clients_table.rowCount() == 1, timeout=10_000)
        # "waiting" while the model loads on demand, then "running" from the next status poll
        qtbot.waitUntil(lambda: clients_row()[2] == "running", timeout=10_000)
        assert clients_row()[1:4] == ["demo-mtp", "running", "chat_completions (stream)"]
        models = view.models_table
        # slots: the demo is small, so --parallel's default gives it 4 sequences
        assert [models.item(0, c).text() for c in range(4)] == ["demo-mtp", "loaded", "1 of 4", "0"]
    finally:
        streaming.close()
    qtbot.waitUntil(lambda: view.clients_table.rowCount() == 0, timeout=10_000)
    assert "loaded demo-mtp in" in panel.log_view.toPlainText()
    view.models_table.selectRow(0)
    assert view.unload_button.isEnabled()
    view.unload_button.click()
    qtbot.waitUntil(lambda: view.models_table.rowCount() == 0, timeout=10_000)
    qtbot.waitUntil(lambda: "unloaded demo-mtp (admin)" in panel.log_view.toPlainText())
    assert "0 of 2 models loaded" in view.summary.text()
    panel.stop_button.click()
    qtbot.waitUntil(lambda: not panel.running, timeout=30_000)
    assert view.models_table.rowCount() == 0 and not view.unload_button.isEnabled()
