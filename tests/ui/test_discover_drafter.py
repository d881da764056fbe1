"""Models page → Discover for Gemma 4: the MTP column says "separate drafter" and the tooltip
where the drafter comes from; Get downloads the trunk and its drafter as one job, and the Models
page lists the trunk with its drafter paired — never the drafter as a model of its own."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtCore import Qt

from app.engine.hub.search import DRAFTER
from app.engine.settings import SettingsStore
from app.engine.store import JobState
from app.ui.main_window import MainWindow
from tests.localhub import LocalHub
from tests.localhub.gemma_repos import TRUNK_Q8, UNSLOTH, UNSLOTH_DRAFTER, seed_gemma_repos

pytestmark = pytest.mark.slow


@pytest.fixture
def hub(local_hub: LocalHub) -> LocalHub:
    seed_gemma_repos(local_hub)
    SettingsStore().update(hub_endpoint=local_hub.endpoint)
    return local_hub


def test_get_a_gemma_model_with_its_drafter(
    hub: LocalHub, open_window: Callable[[], MainWindow], qtbot
) -> None:
    window = open_window()
    window.show_page("models")
    page = window.library
    page.discover_button.click()
    panel = page.discover
    panel.query.setText("gemma-4-Tiny-it-GGUF")
    panel.search_button.click()
    qtbot.waitUntil(lambda: not panel.searching, timeout=30_000)
    rows = [panel.results.cells(r) for r in range(len(panel.results.rows))]
    row = next(i for i, cells in enumerate(rows) if cells[0] == UNSLOTH and cells[2] == "Q8_0")
    assert rows[row][5] == DRAFTER
    tooltip = panel.results.data(panel.results.index(row, 5), Qt.ItemDataRole.ToolTipRole)
    assert f"drafter available in this repo ({UNSLOTH_DRAFTER})" in tooltip

    panel.table.selectRow(row)
    panel.get_button.click()
    qtbot.waitUntil(
        lambda: bool(window.store.jobs()) and window.store.jobs()[0].state.final, timeout=60_000
    )
    [record] = window.store.jobs()
    assert (record.spec.kind, record.state) == ("get", JobState.SUCCEEDED), record.message
    assert record.result["drafter"].endswith(UNSLOTH_DRAFTER)

    page.discover_button.click()
    qtbot.waitUntil(lambda: any(m.path.name == TRUNK_Q8 for m in page.models), timeout=20_000)
    assert not any(m.path.name == UNSLOTH_DRAFTER for m in page.models)
    [model] = [m for m in page.models if m.path.name == TRUNK_Q8]
    assert model.mtp.label == f"Drafter paired: {model.path.parent / UNSLOTH_DRAFTER}"
