"""The download wizard and the job monitor against the local hub: a download driven end to end,
paused and resumed, cancelled and retried from the monitor (continuing from the byte reached),
and the job history surviving a restart of the window — including jobs cut short by quitting."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.engine.settings import SettingsStore
from app.engine.store import JobState
from app.ui.main_window import MainWindow
from tests.localhub import LocalHub
from tests.store.isolation import IsolatedHome

REPO = "acme/tiny-mtp-model"
WEIGHTS = os.urandom(6_000_000)
HEADS = os.urandom(700_000)
WAIT_MS = 60_000  # what a job on a busy machine may take; a passing test waits far less


@pytest.fixture
def hub_window(
    local_hub: LocalHub, open_window: Callable[[], MainWindow]
) -> tuple[MainWindow, LocalHub, str]:
    """A window whose settings point at the local hub, which holds a small model repo."""
    commit = local_hub.seed_files(
        REPO,
        {
            "config.json": b'{"model_type": "qwen3_5"}',
            "model.safetensors": WEIGHTS,
            "mtp.safetensors": HEADS,
        },
    )
    SettingsStore().update(hub_endpoint=local_hub.endpoint)
    return open_window(), local_hub, commit


def snapshot(home: IsolatedHome, commit: str) -> Path:
    return home.hub_cache / "models--acme--tiny-mtp-model" / "snapshots" / commit


def states(window: MainWindow) -> list[tuple[str, str]]:
    jobs = window.jobs
    return [
        (jobs.index(row, 0).data(), jobs.index(row, 1).data()) for row in range(jobs.rowCount())
    ]


@pytest.mark.slow
def test_the_wizard_downloads_a_sidecar_into_the_cache(
    hub_window: tuple[MainWindow, LocalHub, str], qtbot, home: IsolatedHome
) -> None:
    window, hub, commit = hub_window
    wizard = window.open_download_wizard(REPO, ("mtp.safetensors",))
    assert wizard.repo_page.sidecar_radio.isChecked()
    assert wizard.repo_page.isComplete()
    wizard.next()

    plan_page = wizard.plan_page
    qtbot.waitUntil(lambda: plan_page.plan is not None, timeout=WAIT_MS)
    assert plan_page.files_tree.topLevelItemCount() == 1
    assert plan_page.files_tree.topLevelItem(0).text(0) == "mtp.safetensors"
    assert plan_page.files_tree.topLevelItem(0).text(1) == "700.0 kB"
    assert plan_page.cache_radio.isChecked()
    assert str(home.hub_cache) in plan_page.cache_radio.text()
    assert "enough" in plan_page.space_label.text()
    assert plan_page.isComplete()
    wizard.next()  # "Download": the commit page starts the job

    run_page = wizard.run_page
    assert run_page.job_id is not None
    qtbot.waitUntil(run_page.isComplete, timeout=WAIT_MS)
    assert run_page.subTitle() == "Done. The files are verified and in place."
    assert (snapshot(home, commit) / "mtp.safetensors").read_bytes() == HEADS
    assert hub.traffic.bytes_served(REPO, "model.safetensors") == 0
    assert "700.0 kB / 700.0 kB" in run_page.progress.figures_label.text()
    assert states(window)[0] == (f"Download {REPO} (mtp.safetensors)", "succeeded")
    log = run_page.progress.log_view.toPlainText()
    assert log.count("▸ pin: ") == 1, "each line once, however the view caught up"
    assert "▸ verify: mtp.safetensors" in log
    assert log.splitlines()[-1].endswith(
        f"✔ downloaded 1 file(s), 700.0 kB fetched, into {snapshot(home, commit)}"
    )


def test_the_wizard_names_a_missing_repo_and_stays_on_the_page(
    hub_window: tuple[MainWindow, LocalHub, str], qtbot
) -> None:
    window, hub, _commit = hub_window
    wizard = window.open_download_wizard("acme/does-not-exist")
    wizard.next()
    page = wizard.plan_page
    qtbot.waitUntil(lambda: bool(page.plan_error), timeout=WAIT_MS)
    assert page.status_label.text() == (
        f"acme/does-not-exist on {hub.endpoint} does not exist or needs a token; check the "
        "name, or sign in (Settings) if it is private"
    )
    assert not page.isComplete()
    assert window.jobs.rowCount() == 0


@pytest.mark.slow
def test_pause_resume_cancel_and_retry_from_the_monitor(
    hub_window: tuple[MainWindow, LocalHub, str], qtbot, home: IsolatedHome
) -> None:
    window, hub, commit = hub_window
    monitor = window.monitor
    # Every attempt is cut after 200 kB: the job sits in its retry waits (1 s each) with bytes on
    # disk for half a minute, so the pause lands before the file is whole however slow the
    # machine (cut after 1 MB, the 6 MB arrived in five seconds).
    hub.faults.drop_download(match="model.safetensors", after_bytes=200_000, times=None)
    wizard = window.open_download_wizard(REPO, ("model.safetensors",))
    wizard.next()
    qtbot.waitUntil(wizard.plan_page.isComplete, timeout=WAIT_MS)
    wizard.next()
    job_id = wizard.run_page.job_id
    assert job_id is not None
    monitor.select_job(job_id)
    qtbot.waitUntil(lambda: any(r.dropped for r in hub.traffic.requests("GET")), timeout=WAIT_MS)
    assert monitor.pause_button.isEnabled()
    qtbot.mouseClick(monitor.pause_button, Qt.MouseButton.LeftButton)
    assert monitor.pause_button.text() == "Resume"
    assert wizard.run_page.pause_button.text() == "Resume"
    qtbot.waitUntil(lambda: states(window)[0][1] == "paused", timeout=WAIT_MS)
    blobs = home.hub_cache / "models--acme--tiny-mtp-model" / "blobs"
    [partial] = list(blobs.glob("*.incomplete"))
    kept = partial.stat().st_size
    assert 0 < kept < len(WEIGHTS)
    qtbot.wait(300)
    assert partial.stat().st_size == kept, "a paused download receives nothing"

    qtbot.mouseClick(monitor.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: states(window)[0][1] == "cancelled", timeout=WAIT_MS)
    assert wizard.run_page.isComplete()
    assert partial.stat().st_size == kept, "cancel keeps the bytes reached"
    assert monitor.retry_button.isEnabled()
    assert not monitor.cancel_button.isEnabled()

    hub.faults.clear()
    qtbot.mouseClick(monitor.retry_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: states(window)[0][1] == "succeeded", timeout=WAIT_MS)
    assert [state for _title, state in states(window)] == ["succeeded", "cancelled"]
    assert (snapshot(home, commit) / "model.safetensors").read_bytes() == WEIGHTS
    last = [r for r in hub.traffic.requests("GET") if r.file_path == "model.safetensors"][-1]
    assert last.byte_range == f"bytes={kept}-"
    assert window.store.get(window.jobs.job_at(0).job_id).retry_of == job_id
    log = monitor.progress.log_view.toPlainText()
    assert "resuming: " in log


@pytest.mark.slow
def test_history_survives_a_restart_and_quitting_marks_running_jobs_interrupted(
    hub_window: tuple[MainWindow, LocalHub, str],
    open_window: Callable[[], MainWindow],
    qtbot,
    home: IsolatedHome,
) -> None:
    window, hub, commit = hub_window
    done = window.open_download_wizard(REPO, ("config.json",))
    done.next()
    qtbot.waitUntil(done.plan_page.isComplete, timeout=WAIT_MS)
    done.next()
    qtbot.waitUntil(done.run_page.isComplete, timeout=WAIT_MS)

    hub.faults.drop_download(match="model.safetensors", after_bytes=200_000, times=None)
    running = window.open_download_wizard(REPO, ("model.safetensors",))
    running.next()
    qtbot.waitUntil(running.plan_page.isComplete, timeout=WAIT_MS)
    running.next()
    running_id = running.run_page.job_id
    assert running_id is not None
    window.runner.set_paused(running_id, True)
    qtbot.waitUntil(lambda: states(window)[0][1] == "paused", timeout=WAIT_MS)
    window.shutdown()  # what closing the window does once the user confirms

    again = open_window()
    assert states(again) == [
        (f"Download {REPO} (model.safetensors)", "interrupted"),
        (f"Download {REPO} (config.json)", "succeeded"),
    ]
    again.monitor.select_job(running_id)
    progress = again.monitor.progress
    assert "the app was closed while this job was running; retry it to continue" in (
        progress.stage_label.text()
    )
    assert "▸ paused: model.safetensors" in progress.log_view.toPlainText()
    assert again.monitor.retry_button.isEnabled()
    assert again.monitor.files_button.isEnabled()
    hub.faults.clear()
    qtbot.mouseClick(again.monitor.retry_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: states(again)[0][1] == "succeeded", timeout=WAIT_MS)
    assert (snapshot(home, commit) / "model.safetensors").read_bytes() == WEIGHTS
    assert again.store.get(again.jobs.job_at(0).job_id).state is JobState.SUCCEEDED
