"""Models page → Discover on the Hub: a search against the local hub fills the results table
(one row per quantisation, sizes, fits, MTP) without blocking the window, and Get runs a job that
grafts the catalog sidecar into the chosen GGUF, after which the Models page lists it with its
head inside. Screenshots of both go to /tmp/shots-search25/ when that folder exists."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.engine.mtp import LocalFolderSource, extract_mtp
from app.engine.settings import SettingsStore, app_dirs
from app.engine.store import JobState
from app.ui.main_window import MainWindow
from tests.catalog.helpers import entry, write_catalog
from tests.graft.bases import DEMO_FP8, DEMO_GGUF, write_trunk_only
from tests.localhub import LocalHub
from tests.localhub.shaped_repos import GGUF_REPO, card, seed_shaped_repos

pytestmark = pytest.mark.slow

BASE = "acme/Demo-MTP"
DEMO_REPO = "quantfolk/Demo-MTP-GGUF"
SIDECAR_REPO = "acme/demo-mtp-mtp"
SHOTS = Path("/tmp/shots-search25")


@pytest.fixture
def hub(local_hub: LocalHub, tmp_path: Path) -> LocalHub:
    seed_shaped_repos(local_hub)
    trunk = write_trunk_only(DEMO_GGUF, tmp_path / "Demo-MTP-Q8_0.gguf")
    sidecar = tmp_path / "mtp.safetensors"
    extract_mtp(LocalFolderSource(DEMO_FP8), sidecar)
    local_hub.seed_files(DEMO_REPO, {"README.md": card(BASE), "Demo-MTP-Q8_0.gguf": trunk})
    local_hub.seed_files(SIDECAR_REPO, {"mtp.safetensors": sidecar})
    catalog = write_catalog(
        tmp_path / "catalog.yaml",
        entry(
            "demo-gguf",
            source_model=BASE,
            mtp_source_repo=BASE,
            mtp_sidecar_repo=SIDECAR_REPO,
            quant="Q8_0",
            output_name="Demo-MTP-Q8_0.gguf",
        ),
    )
    SettingsStore().update(hub_endpoint=local_hub.endpoint, catalog_files=[str(catalog)])
    return local_hub


def shot(widget, name: str) -> None:
    if SHOTS.is_dir():
        widget.grab().save(str(SHOTS / name))


def test_search_then_get_makes_a_model_mtp_ready(
    hub: LocalHub, open_window: Callable[[], MainWindow], qtbot
) -> None:
    window = open_window()
    window.show_page("models")
    page = window.library
    page.discover_button.click()
    panel = page.discover
    assert panel.isVisible() and not panel.get_button.isEnabled()

    panel.query.setText("MTP")
    panel.format.setCurrentText("gguf")
    panel.search_button.click()
    assert panel.searching  # the search runs in the background; the window stays responsive
    qtbot.waitUntil(lambda: not panel.searching, timeout=20_000)
    rows = {
        panel.results.cells(r)[0:3]: panel.results.cells(r) for r in range(len(panel.results.rows))
    }
    assert rows[(GGUF_REPO, "gguf + vision", "BF16")][3] == "1.0 MB (3 parts)"
    vision_row = list(rows).index((GGUF_REPO, "gguf + vision", "BF16"))
    tip = panel.results.index(vision_row, 0).data(Qt.ItemDataRole.ToolTipRole)
    assert "vision projector: mmproj-Tiny-MTP-8B-f16.gguf" in tip
    assert rows[(DEMO_REPO, "gguf", "Q8_0")][5] == "sidecar in catalog"
    assert rows[(DEMO_REPO, "gguf", "Q8_0")][4].endswith("fits")
    assert panel.status.text().startswith("4 repo(s), 6 quantisation(s) in ")
    demo_row = list(rows).index((DEMO_REPO, "gguf", "Q8_0"))
    panel.table.selectRow(demo_row)
    shot(window, "discover-results.png")

    assert panel.get_button.isEnabled()
    panel.get_button.click()
    seen = set()  # the status line follows the job instead of saying "started, see Jobs"
    qtbot.waitUntil(
        lambda: (
            seen.add(panel.status.text())
            or (bool(window.store.jobs()) and window.store.jobs()[0].state.final)
        ),
        timeout=60_000,
    )
    [record] = window.store.jobs()
    assert (record.spec.kind, record.state) == ("get", JobState.SUCCEEDED), record.message
    ready = app_dirs().grafted_models / "Demo-MTP-Q8_0-mtp.gguf"
    assert record.result["ready_path"] == str(ready)
    qtbot.waitUntil(panel.chat_button.isVisible)
    assert panel.status.text().startswith("Get quantfolk/Demo-MTP-GGUF")
    assert ": ready, Demo-MTP-Q8_0-mtp.gguf" in panel.status.text()
    assert not any(text.endswith("see Jobs") for text in seen)

    window.show_page("jobs")  # the finished Get offers Chat on the Jobs page too, and its log
    window.monitor.select_job(record.job_id)  # says what each step did, "done" nowhere twice
    log = window.monitor.progress.log_view.toPlainText()
    assert "ready to chat: " + str(ready) in log and log.count("✔ done") == 0
    assert window.monitor.chat_button.isVisible()
    window.show_page("models")
    qtbot.mouseClick(panel.chat_button, Qt.MouseButton.LeftButton)
    assert window.current_page == "chat"
    qtbot.waitUntil(
        lambda: window.chat_window.model_bar.state.text() == f"Ready: {ready.name}", timeout=60_000
    )
    window.show_page("models")

    page.discover_button.click()
    qtbot.waitUntil(lambda: any(m.path == ready for m in page.models), timeout=20_000)
    [model] = [m for m in page.models if m.path == ready]
    assert model.mtp.label.startswith("Head inside")
    page.table.selectRow(next(i for i, m in enumerate(page.models) if m.path == ready))
    shot(window, "models-mtp-ready.png")


def test_an_empty_search_says_what_to_type(open_window: Callable[[], MainWindow]) -> None:
    panel = open_window().library.discover
    panel.search()
    assert "give a text to search for" in panel.status.text()
    assert not panel.searching
