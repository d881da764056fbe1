"""The publish wizard driven end to end against the local hub with the real client: dry run,
pre-flight, live run with stages and byte progress, result links; skip or force when already
published; a readable failure, then a retry from the job monitor."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.engine.settings import SettingsStore
from app.ui.catalog.status import Published
from app.ui.main_window import MainWindow
from app.ui.wizards.publish import STAGES, PublishWizard
from tests.catalog.helpers import entry, write_catalog
from tests.hub.sources import (
    FAMILIES,
    local_extraction,
    read_sidecar,
    seed_source,
    seed_trunk_only,
)
from tests.localhub import LocalHub
from tests.localhub.fixtures import TEST_TOKEN
from tests.store.isolation import IsolatedHome

KEY = "qwen3-6b-mlx-4bit"
FAMILY = FAMILIES["qwen-bf16"]  # Qwen/Qwen3-6B → acme/qwen3-6b-mtp


@pytest.fixture
def window(
    local_hub: LocalHub, open_window: Callable[[], MainWindow], home: IsolatedHome
) -> MainWindow:
    catalog = write_catalog(home.root / "mine.yaml", entry(KEY))
    SettingsStore().update(
        hub_endpoint=local_hub.endpoint,
        scratch_dir=str(home.root / "scratch"),
        catalog_files=(str(catalog),),
    )
    return open_window()


def start_wizard(window: MainWindow, qtbot) -> PublishWizard:
    window.browser.select_key(KEY)
    detail = window.browser.detail
    assert detail.publish_button.isEnabled()
    qtbot.mouseClick(detail.publish_button, Qt.MouseButton.LeftButton)
    wizard = [w for w in window.open_wizards if isinstance(w, PublishWizard)][-1]
    assert wizard.entry_page.entry().key == KEY
    return wizard


def through_preflight(wizard: PublishWizard, qtbot) -> None:
    wizard.next()  # dry run
    wizard.next()  # pre-flight
    qtbot.waitUntil(wizard.preflight_page.isComplete, timeout=10_000)


@pytest.mark.slow
def test_publish_end_to_end(
    window: MainWindow, local_hub: LocalHub, qtbot, home: IsolatedHome, tmp_path: Path
) -> None:
    seed_source(local_hub, FAMILY, tmp_path / "checkpoint")
    book = window.status_book
    qtbot.waitUntil(lambda: book.status("acme/qwen3-6b-mtp").published is Published.NO)
    local_hub.traffic.reset()  # the browser's background status check is done
    wizard = start_wizard(window, qtbot)
    wizard.next()
    scratch = home.root / "scratch"
    assert wizard.dry_run_page.lines.toPlainText().splitlines() == [
        "mtp source repo: hf://Qwen/Qwen3-6B",
        "mtp sidecar repo: hf://acme/qwen3-6b-mtp/mtp.safetensors",
        "mtp precision: bf16 (unquantized)",
        f"mtp output path: {scratch / 'acme--qwen3-6b-mtp-mtp.safetensors'}",
    ]
    assert local_hub.traffic.count() == 0, "the dry run touches no network"

    wizard.next()
    preflight = wizard.preflight_page
    qtbot.waitUntil(preflight.isComplete, timeout=10_000)
    assert preflight.token_label.text() == f"✔ Token found: hf_…{TEST_TOKEN[-4:]} (from HF_TOKEN)"
    assert preflight.access_label.text() == (
        "✔ mtp-tester may write to acme/qwen3-6b-mtp (will be created)"
    )
    assert preflight.published_label.text() == "✔ Not published yet"
    assert not preflight.force_radio.isVisibleTo(preflight)

    wizard.next()  # "Publish"
    run = wizard.run_page
    qtbot.waitUntil(run.isComplete, timeout=60_000)
    assert run.state == "succeeded", run.message
    assert [run.stages.item(i).text() for i in range(run.stages.count())] == [
        f"✔  {label}" for _name, label in STAGES
    ]
    log = run.progress.log_view.toPlainText()
    assert "▸ upload: hf://acme/qwen3-6b-mtp/mtp.safetensors" in log
    assert TEST_TOKEN not in log

    wizard.next()
    summary = wizard.result_page.summary.text()
    assert wizard.result_page.subTitle() == "Published."
    assert f"{local_hub.endpoint}/acme/qwen3-6b-mtp/commit/" in summary
    assert f"href='{local_hub.endpoint}/acme/qwen3-6b-mtp'" in summary
    reference = read_sidecar(
        local_extraction(tmp_path / "checkpoint", tmp_path / "reference.safetensors")
    )
    published = read_sidecar(local_hub.read_file("acme/qwen3-6b-mtp", "mtp.safetensors"))
    assert (published.tensors, published.data) == (reference.tensors, reference.data)
    assert window.jobs.index(0, 0).data() == "Publish sidecar acme/qwen3-6b-mtp"
    assert window.jobs.index(0, 1).data() == "succeeded"
    # The browser learns that the sidecar is now published.
    qtbot.waitUntil(lambda: book.status("acme/qwen3-6b-mtp").published is Published.YES)
    window.browser.select_key(KEY)
    assert window.browser.detail.status_label.text().startswith("<b>Sidecar:</b> published")


@pytest.mark.slow
def test_already_published_offers_skip_or_force(
    window: MainWindow, local_hub: LocalHub, qtbot, tmp_path: Path
) -> None:
    seed_source(local_hub, FAMILY, tmp_path / "checkpoint")
    local_hub.seed_files("acme/qwen3-6b-mtp", {"mtp.safetensors": b"an earlier sidecar"})
    first_commit = local_hub.head("acme/qwen3-6b-mtp")

    wizard = start_wizard(window, qtbot)
    through_preflight(wizard, qtbot)
    preflight = wizard.preflight_page
    assert preflight.published_label.text() == (
        "⚠ Already published: hf://acme/qwen3-6b-mtp/mtp.safetensors exists."
    )
    assert preflight.skip_radio.isVisibleTo(preflight) and preflight.skip_radio.isChecked()
    wizard.next()
    qtbot.waitUntil(wizard.run_page.isComplete, timeout=30_000)
    wizard.next()
    assert wizard.result_page.subTitle() == "Already published: nothing was uploaded."
    assert local_hub.head("acme/qwen3-6b-mtp") == first_commit
    wizard.accept()

    again = start_wizard(window, qtbot)
    through_preflight(again, qtbot)
    again.preflight_page.force_radio.setChecked(True)
    again.next()
    qtbot.waitUntil(again.run_page.isComplete, timeout=60_000)
    assert again.run_page.state == "succeeded", again.run_page.message
    assert local_hub.head("acme/qwen3-6b-mtp") != first_commit
    assert local_hub.read_file("acme/qwen3-6b-mtp", "mtp.safetensors") != b"an earlier sidecar"


@pytest.mark.slow
def test_a_failure_reads_as_a_fix_and_the_monitor_retries_it(
    window: MainWindow, local_hub: LocalHub, qtbot, tmp_path: Path
) -> None:
    seed_trunk_only(local_hub, "Qwen/Qwen3-6B", tmp_path / "converted")
    wizard = start_wizard(window, qtbot)
    through_preflight(wizard, qtbot)
    wizard.next()
    qtbot.waitUntil(wizard.run_page.isComplete, timeout=30_000)
    assert wizard.run_page.state == "failed"
    wizard.next()
    summary = wizard.result_page.summary.text()
    assert "no MTP head tensors found in" in summary
    assert "Traceback" not in summary
    assert "Retry it from the Jobs page" in summary
    assert (
        not local_hub.store.exists("acme/qwen3-6b-mtp")
        if hasattr(local_hub.store, "exists")
        else True
    )

    # The heads arrive in the source repo; Retry in the monitor publishes them.
    seed_source(local_hub, FAMILY, tmp_path / "checkpoint")
    monitor = window.monitor
    monitor.select_job(wizard.run_page.job_id)
    assert monitor.retry_button.isEnabled()
    qtbot.mouseClick(monitor.retry_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.jobs.index(0, 1).data() == "succeeded", timeout=60_000)
    assert local_hub.read_file("acme/qwen3-6b-mtp", "mtp.safetensors")
