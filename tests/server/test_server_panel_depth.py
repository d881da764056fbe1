"""The Server panel's MTP depth (Qt offscreen): "Auto (recommended)" by default, and the server it
starts decodes with what was chosen — auto, or a fixed depth picked in the spin box."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import threading
from typing import Any

import pytest
from openai import OpenAI

from app.ui.server.panel import ServerPanel
from tests.ports import free_port

pytestmark = pytest.mark.slow

START_MS = 120_000


@pytest.fixture
def panel(qtbot) -> ServerPanel:
    """The panel on the test's app folders (its server process inherits them); at the end its
    server is stopped, then the panel closed and deleted."""
    widget = ServerPanel()
    qtbot.addWidget(widget, before_close_func=ServerPanel.shutdown)
    widget.show()
    return widget


def serve_and_ask(qtbot, panel: ServerPanel) -> tuple[str, dict[str, Any]]:
    """Start the panel's server, send one chat request, stop it: the status line while it
    served, and the reply's ``mtp`` object."""
    panel.port_spin.setValue(free_port())
    panel.start_button.click()
    qtbot.waitUntil(lambda: panel.url != "", timeout=START_MS)
    status = panel.status_label.text()
    served = panel.requests_served
    replies: list[dict[str, Any]] = []

    def ask() -> None:
        client = OpenAI(base_url=panel.url, api_key="unused", max_retries=0)
        reply = client.chat.completions.create(
            model="demo-mtp", messages=[{"role": "user", "content": "Hi"}], max_tokens=12
        )
        replies.append(reply.model_extra["mtp"])

    caller = threading.Thread(target=ask)  # the GUI thread keeps handling the server's output
    caller.start()
    qtbot.waitUntil(lambda: panel.requests_served == served + 1, timeout=60_000)
    caller.join()
    panel.stop_button.click()
    qtbot.waitUntil(lambda: not panel.running, timeout=30_000)
    return status, replies[0]


def test_panel_defaults_to_auto_and_serves_the_chosen_depth(qtbot, panel: ServerPanel) -> None:
    assert panel.depth_spin.text() == "Auto (recommended)" and panel.mtp_depth() == "auto"
    status, mtp = serve_and_ask(qtbot, panel)
    assert status.endswith("· MTP depth auto")
    assert mtp["depth"] == "auto" and mtp["adaptive"] is True
    assert "depth auto" in panel.log_view.toPlainText()

    panel.depth_spin.setValue(2)
    assert panel.depth_spin.text() == "2" and panel.mtp_depth() == "2"
    status, mtp = serve_and_ask(qtbot, panel)
    assert status.endswith("· MTP depth 2")
    assert mtp["depth"] == 2 and len(mtp["drafted_by_depth"]) == 2
