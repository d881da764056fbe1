"""The download wizard's quantisation picker against the local hub: a GGUF repo's quantisations
are listed with sizes (a split one once), a fits mark and how each gets its MTP head; the one
picked and the repo's vision projector — and nothing else — are downloaded. A screenshot of the
picker goes to SHOTS_DIR."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from app.engine.settings import SettingsStore
from app.ui.main_window import MainWindow
from tests.localhub import LocalHub
from tests.localhub.shaped_repos import GGUF_REPO, PROJECTOR, SIZES, seed_shaped_repos

SHOTS_DIR = Path(os.environ.get("MTP_STUDIO_SHOTS", "/tmp/shots-head25"))


@pytest.fixture
def window(local_hub: LocalHub, open_window: Callable[[], MainWindow]) -> MainWindow:
    seed_shaped_repos(local_hub)
    SettingsStore().update(hub_endpoint=local_hub.endpoint)
    return open_window()


def rows(tree) -> list[tuple[str, ...]]:
    return [
        tuple(tree.topLevelItem(i).text(c) for c in range(tree.columnCount()))
        for i in range(tree.topLevelItemCount())
    ]


@pytest.mark.slow
def test_the_picked_quantisation_and_its_projector_and_nothing_else_are_downloaded(
    window: MainWindow, local_hub: LocalHub, qtbot
) -> None:
    wizard = window.open_download_wizard(GGUF_REPO)
    page = wizard.repo_page
    picker = page.quant_picker
    qtbot.waitUntil(lambda: picker.tree.topLevelItemCount() == 3, timeout=10_000)
    listed = rows(picker.tree)
    assert [row[:2] for row in listed] == [
        ("Q4_K_M", "300.0 kB"),
        ("Q8_0", "500.0 kB"),
        ("BF16", "1.0 MB (3 parts)"),
    ]
    assert all(row[2].split(" ", 1)[1] in ("fits", "tight", "too big") for row in listed)
    assert {row[3] for row in listed} == {"none"}  # no catalog sidecar and none on this hub
    assert page.quant_radio.isChecked() and page.quant() in ("Q4_K_M", "Q8_0", "BF16")
    SHOTS_DIR.mkdir(parents=True, exist_ok=True)
    assert wizard.grab().save(str(SHOTS_DIR / "download-wizard-quant-picker.png"))

    picker.tree.setCurrentItem(picker.tree.topLevelItem(1))  # the user picks Q8_0
    assert page.quant() == "Q8_0" and page.isComplete()
    wizard.next()
    plan_page = wizard.plan_page
    qtbot.waitUntil(lambda: plan_page.plan is not None, timeout=10_000)
    assert rows(plan_page.files_tree) == [
        ("Tiny-MTP-8B-Q8_0.gguf", "500.0 kB"),
        (PROJECTOR, "60.0 kB"),
    ]
    local_hub.traffic.reset()
    wizard.next()
    qtbot.waitUntil(wizard.run_page.isComplete, timeout=20_000)
    assert wizard.run_page.subTitle() == "Done. The files are verified and in place."
    served = local_hub.traffic.bytes_served_per_file()
    assert set(served) == {(GGUF_REPO, "Tiny-MTP-8B-Q8_0.gguf"), (GGUF_REPO, PROJECTOR)}
    assert local_hub.traffic.bytes_served(GGUF_REPO) == (
        SIZES["Tiny-MTP-8B-Q8_0.gguf"] + SIZES[PROJECTOR]
    )


@pytest.mark.slow
def test_a_repo_without_quantisations_keeps_the_file_choices(window: MainWindow, qtbot) -> None:
    wizard = window.open_download_wizard("acme/Tiny-MTP-8B")  # a safetensors base model
    page = wizard.repo_page
    qtbot.wait(1500)  # the lookup runs LOOKUP_DELAY_MS after the id stops changing
    assert not page.quant_radio.isVisible() and page.all_radio.isChecked()
    assert page.quant_picker.tree.topLevelItemCount() == 0
