"""The download wizard against a Hub that lists a climbing path: the user sees the refusal before
starting, the safe files arrive, the job ends as failed with the skipped entry named, and
nothing lands outside the destination folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from app.engine.settings import SettingsStore
from app.engine.store import JobState
from app.ui.main_window import MainWindow
from tests.hardening.outside import tree_state, written_outside
from tests.localhub import LocalHub

REPO = "evil/repo"


@pytest.fixture
def window(local_hub: LocalHub, open_window: Callable[[], MainWindow]) -> MainWindow:
    SettingsStore().update(hub_endpoint=local_hub.endpoint)
    return open_window()


@pytest.mark.slow
def test_the_wizard_shows_the_refused_entry_and_the_job_fails_naming_it(
    window: MainWindow, local_hub: LocalHub, qtbot, tmp_path: Path
) -> None:
    local_hub.seed_files(REPO, {"config.json": b"{}", "victim.txt": b"elsewhere, please"})
    local_hub.forge_listing(REPO, "victim.txt", path="../climb.txt")
    destination = tmp_path / "D" / "x"
    before = tree_state(tmp_path)

    wizard = window.open_download_wizard(REPO, ())
    wizard.next()
    plan_page = wizard.plan_page
    qtbot.waitUntil(lambda: plan_page.plan is not None, timeout=10_000)
    status = plan_page.status_label.text()
    assert "Refused 1 unsafe entry" in status and "'../climb.txt'" in status
    assert [plan_page.files_tree.topLevelItem(i).text(0) for i in range(2)] == [
        ".gitattributes",
        "config.json",
    ]
    plan_page.folder_radio.setChecked(True)
    plan_page.folder_field.edit.setText(str(destination))
    assert plan_page.isComplete()
    wizard.next()

    run_page = wizard.run_page
    qtbot.waitUntil(run_page.isComplete, timeout=20_000)
    assert run_page.subTitle().startswith(f"The download {JobState.FAILED}")
    [record] = window.store.jobs()
    assert record.state == JobState.FAILED
    assert "'../climb.txt'" in record.error
    assert (destination / "config.json").read_bytes() == b"{}"
    assert written_outside(before, tree_state(tmp_path), destination) == []
