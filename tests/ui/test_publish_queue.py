"""Catalog → "Publish every missing sidecar" against the local hub with the real client: the
sidecars the Hub lacks are published one job at a time (each in Jobs), entries sharing a
sidecar publish it once, and a failing one does not stop the queue."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMessageBox

from app.engine.settings import SettingsStore
from app.engine.store import JobState
from app.ui.catalog.status import Published
from app.ui.main_window import MainWindow
from tests.catalog.helpers import entry, write_catalog
from tests.hub.sources import FAMILIES, seed_source
from tests.localhub import LocalHub
from tests.store.isolation import IsolatedHome

SHARED_SIDECAR = "acme/qwen3-6b-mtp"  # the source of FAMILIES["qwen-bf16"] is Qwen/Qwen3-6B
MISSING_SOURCE_SIDECAR = "acme/nowhere-mtp"


@pytest.fixture
def window(
    local_hub: LocalHub, open_window: Callable[[], MainWindow], home: IsolatedHome
) -> MainWindow:
    catalog = write_catalog(
        home.root / "mine.yaml",
        entry("qwen3-6b-mlx-4bit"),
        entry("qwen3-6b-mlx-8bit", quant="8bit"),  # the same sidecar: published once
        entry(
            "nowhere-4bit",
            source_model="acme/nowhere",
            mtp_source_repo="acme/nowhere",
            mtp_sidecar_repo=MISSING_SOURCE_SIDECAR,
        ),
    )
    SettingsStore().update(
        hub_endpoint=local_hub.endpoint,
        scratch_dir=str(home.root / "scratch"),
        catalog_files=(str(catalog),),
    )
    return open_window()


@pytest.mark.slow
def test_every_missing_sidecar_is_published_one_job_at_a_time(
    window: MainWindow, local_hub: LocalHub, qtbot, tmp_path: Path
) -> None:
    seed_source(local_hub, FAMILIES["qwen-bf16"], tmp_path / "checkpoint")
    book = window.status_book
    book.refresh([SHARED_SIDECAR, MISSING_SOURCE_SIDECAR], force=True)
    qtbot.waitUntil(
        lambda: all(
            book.status(repo).published is Published.NO
            for repo in (SHARED_SIDECAR, MISSING_SOURCE_SIDECAR)
        ),
        timeout=10_000,
    )
    assert window.catalog.publish_missing_button.isVisibleTo(window.page_widgets["catalog"])

    box = window.publish_missing_sidecars()
    assert box.text() == "Publish 2 sidecar(s), one after another?"
    assert f"• {SHARED_SIDECAR}" in box.informativeText()
    assert f"• {MISSING_SOURCE_SIDECAR}" in box.informativeText()
    box.button(QMessageBox.StandardButton.Yes).click()

    queue = window.catalog.publish_queue
    assert queue.running and queue.waiting == 1
    assert "1 waiting" in window.catalog.queue_label.text()
    qtbot.waitUntil(lambda: len(queue.started_jobs) == 2 and not queue.running, timeout=90_000)

    first, second = (window.store.get(job_id) for job_id in queue.started_jobs)
    assert first.state is JobState.SUCCEEDED, first.error
    assert second.state is JobState.FAILED and "acme/nowhere" in second.error
    assert second.started_at >= first.finished_at  # one after another, never side by side
    assert local_hub.read_file(SHARED_SIDECAR, "mtp.safetensors")
    assert window.catalog.queue_label.text() == ""
    titles = [window.jobs.job_at(row).record.spec.title for row in range(2)]
    assert titles == [
        f"Publish sidecar {MISSING_SOURCE_SIDECAR}",
        f"Publish sidecar {SHARED_SIDECAR}",
    ]
