"""The download wizard, opened for a catalog GGUF entry with a sidecar repo, offers to fetch the
sidecar too and graft its head into the downloaded GGUF: one job, and the result drafts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from app.engine.gguf_header import read_gguf_header
from app.engine.mtp import LocalFolderSource, extract_mtp
from app.engine.settings import SettingsStore, app_dirs
from app.engine.store import JobState
from app.ui.main_window import MainWindow
from tests.graft.bases import DEMO_FP8, DEMO_GGUF, write_trunk_only
from tests.localhub import LocalHub
from tests.store.isolation import IsolatedHome

pytestmark = pytest.mark.slow

MODEL_REPO = "acme/Demo-Q8_0-GGUF"
SIDECAR_REPO = "acme/demo-mtp"


@pytest.fixture
def hub_with_gguf_and_sidecar(local_hub: LocalHub, tmp_path: Path) -> LocalHub:
    trunk = write_trunk_only(DEMO_GGUF, tmp_path / "Demo-Q8_0.gguf")
    sidecar = tmp_path / "mtp.safetensors"
    extract_mtp(LocalFolderSource(DEMO_FP8), sidecar)
    local_hub.seed_files(MODEL_REPO, {"Demo-Q8_0.gguf": trunk.read_bytes()})
    local_hub.seed_files(SIDECAR_REPO, {"mtp.safetensors": sidecar.read_bytes()})
    SettingsStore().update(hub_endpoint=local_hub.endpoint)
    return local_hub


def test_the_wizard_downloads_a_gguf_with_its_sidecar_and_grafts_the_head(
    hub_with_gguf_and_sidecar: LocalHub,
    open_window: Callable[[], MainWindow],
    qtbot,
    home: IsolatedHome,
) -> None:
    window = open_window()
    wizard = window.open_download_wizard(MODEL_REPO, sidecar_repo=SIDECAR_REPO)
    check = wizard.repo_page.graft_check
    assert check.isVisible() and check.isChecked()
    assert SIDECAR_REPO in check.text()
    wizard.next()
    plan_page = wizard.plan_page
    qtbot.waitUntil(lambda: plan_page.plan is not None, timeout=20_000)
    assert plan_page.isComplete(), plan_page.space_label.text()
    wizard.next()

    run_page = wizard.run_page
    qtbot.waitUntil(run_page.isComplete, timeout=60_000)
    assert "has its MTP head" in run_page.subTitle()
    grafted = app_dirs().grafted_models / "Demo-Q8_0-mtp.gguf"
    metadata = read_gguf_header(grafted).metadata
    assert metadata["qwen35.nextn_predict_layers"] == 1
    assert metadata["qwen35.block_count"] == 9
    (record,) = window.store.jobs()
    assert record.spec.kind == "download_graft"
    assert record.state == JobState.SUCCEEDED
    assert record.result["grafted"] == [str(grafted)]


def test_the_offer_is_absent_without_a_sidecar_repo(open_window: Callable[[], MainWindow]) -> None:
    wizard = open_window().open_download_wizard(MODEL_REPO)
    assert not wizard.repo_page.grafting()
    assert not wizard.repo_page.graft_check.isVisible()


def test_a_catalog_gguf_entry_offers_the_graft_and_an_mlx_entry_does_not(
    open_window: Callable[[], MainWindow],
) -> None:
    window = open_window()
    window.download_model("qwen3-5-27b-gguf-q4-k-m")
    gguf_wizard = window.open_wizards[-1]
    assert gguf_wizard.repo_page.grafting()
    assert gguf_wizard.repo_page.sidecar_repo == "mtp-studio/qwen3-5-27b-mtp"
    window.download_model("qwen3-5-27b-mlx-4bit")
    assert not window.open_wizards[-1].repo_page.grafting()


def test_downloading_only_the_sidecar_turns_the_graft_off(
    open_window: Callable[[], MainWindow],
) -> None:
    wizard = open_window().open_download_wizard(MODEL_REPO, sidecar_repo=SIDECAR_REPO)
    wizard.repo_page.sidecar_radio.setChecked(True)
    assert not wizard.repo_page.graft_check.isEnabled()
    assert not wizard.repo_page.grafting()
