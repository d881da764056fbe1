"""The catalog browser as a user drives it: grouping, search and filters, inline problems,
editing with validation as you type, atomic save, and sidecar status from the Hub."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtWidgets import QDialogButtonBox

from app.engine.catalog import Catalog, default_catalog_path
from app.ui.catalog.editor import EntryEditor
from app.ui.catalog.model import PROBLEMS_COL, SIDECAR_COL
from app.ui.catalog.proxy import WITH_SIDECAR, WITHOUT_SIDECAR
from app.ui.main_window import MainWindow
from tests.localhub import LocalHub
from tests.store.isolation import IsolatedHome

MY_CATALOG = """\
# my own models
models:
  - key: tiny-mtp-4bit
    source_model: acme/Tiny-MTP
    quant: 4bit
    tier: small
    slices: [full]
    output_name: Tiny-MTP-4bit
    hf_repo: acme/Tiny-MTP-4bit
    mtp_source_repo: acme/Tiny-MTP
    mtp_sidecar_repo: acme/tiny-mtp-mtp
    notes: keep me  # a field MTP Studio does not know
  - key: tiny-plain-8bit
    source_model: acme/Tiny-Plain
    quant: 8bit
    tier: small
    slices: [full]
    output_name: Tiny-Plain-8bit
    hf_repo: acme/Tiny-Plain-8bit
  - key: Broken_Key
    source_model: acme/Tiny-MTP
    quant: 4bit
    tier: small
    slices: [full]
    output_name: Broken
    hf_repo: acme/Broken
    mtp_source_repo: acme/Tiny-MTP
"""


def visible_keys(window: MainWindow) -> list[str]:
    proxy = window.browser.proxy
    keys = []
    for group_row in range(proxy.rowCount()):
        group = proxy.index(group_row, 0)
        for entry_row in range(proxy.rowCount(group)):
            keys.append(proxy.index(entry_row, 0, group).data())
    return keys


def visible_groups(window: MainWindow) -> list[str]:
    proxy = window.browser.proxy
    return [proxy.index(row, 0).data() for row in range(proxy.rowCount(QModelIndex()))]


@pytest.fixture
def my_catalog(home: IsolatedHome) -> Path:
    path = home.root / "mine.yaml"
    path.write_text(MY_CATALOG)
    return path


def test_the_bundled_catalog_is_grouped_by_base_model(main_window: MainWindow) -> None:
    counts: dict[str, int] = {}
    for row in Catalog.open().rows():
        base = row.fields.get("mtp_source_repo") or row.fields["source_model"]
        counts[base] = counts.get(base, 0) + 1
    expected = [f"{base}  ({n} {'entry' if n == 1 else 'entries'})" for base, n in counts.items()]
    assert len(expected) > 3, "the bundled catalog must show without any setup"
    assert visible_groups(main_window) == expected
    assert "qwen3-6-27b-mlx-4bit" in visible_keys(main_window)
    assert main_window.windowTitle() == "MTP Studio — bundled catalog"


def test_search_and_filters_narrow_the_tree(main_window: MainWindow, qtbot, my_catalog) -> None:
    browser = main_window.browser
    assert browser.open_files([my_catalog])
    assert visible_keys(main_window) == ["tiny-mtp-4bit", "Broken_Key", "tiny-plain-8bit"]

    qtbot.keyClicks(browser.search_edit, "tiny plain")
    assert visible_keys(main_window) == ["tiny-plain-8bit"]
    assert visible_groups(main_window) == ["acme/Tiny-Plain  (1 entry)"]
    browser.search_edit.clear()

    browser.sidecar_combo.setCurrentIndex(browser.sidecar_combo.findData(WITHOUT_SIDECAR))
    # Broken_Key has only half of the MTP fields: no usable sidecar.
    assert visible_keys(main_window) == ["Broken_Key", "tiny-plain-8bit"]
    browser.sidecar_combo.setCurrentIndex(browser.sidecar_combo.findData(WITH_SIDECAR))
    assert "tiny-plain-8bit" not in visible_keys(main_window)
    assert "tiny-mtp-4bit" in visible_keys(main_window)
    browser.sidecar_combo.setCurrentIndex(0)

    browser.quant_combo.setCurrentIndex(browser.quant_combo.findData("8bit"))
    assert visible_keys(main_window) == ["tiny-plain-8bit"]
    browser.quant_combo.setCurrentIndex(0)
    browser.tier_combo.setCurrentIndex(browser.tier_combo.findData("small"))
    assert sorted(visible_keys(main_window)) == ["Broken_Key", "tiny-mtp-4bit", "tiny-plain-8bit"]

    qtbot.keyClicks(browser.search_edit, "no-such-model")
    assert visible_keys(main_window) == []
    assert browser.empty_label.isVisibleTo(browser)


def test_problems_are_shown_on_the_row(main_window: MainWindow, my_catalog: Path) -> None:
    main_window.browser.merge_file(my_catalog)
    model = main_window.browser.model
    broken = next(n for n in model.entries() if n.key == "Broken_Key")
    messages = [p.message for p in broken.problems]
    assert any("not lowercase-kebab" in m for m in messages)
    assert any("mtp_sidecar_repo is missing" in m for m in messages)
    # The row is there, marked, with the first problem and the count in its last column.
    broken_index = model.index_of_key("Broken_Key")
    problems_cell = broken_index.siblingAtColumn(PROBLEMS_COL).data()
    assert problems_cell.startswith("key: key 'Broken_Key' is not lowercase-kebab")
    assert "(+1 more)" in problems_cell
    assert broken_index.data(Qt.ItemDataRole.DecorationRole) is not None
    assert "mtp_sidecar_repo is missing" in broken_index.data(Qt.ItemDataRole.ToolTipRole)


def test_bundled_entries_are_read_only_and_say_why(main_window: MainWindow) -> None:
    browser = main_window.browser
    browser.select_key("qwen3-6-27b-mlx-4bit")
    detail = browser.detail
    assert detail.key == "qwen3-6-27b-mlx-4bit"
    assert not detail.edit_button.isEnabled()
    assert "bundled catalog is read-only" in detail.edit_button.toolTip()
    assert detail.publish_button.isEnabled()
    assert browser.paths == [default_catalog_path()]


def test_chat_in_the_detail_pane_opens_the_chat_on_that_entry(
    main_window: MainWindow, qtbot
) -> None:
    detail = main_window.browser.detail
    main_window.browser.select_key("qwen3-6-27b-mlx-4bit")
    assert detail.chat_button.isEnabled()
    qtbot.mouseClick(detail.chat_button, Qt.MouseButton.LeftButton)
    assert main_window.current_page == "chat"
    chat = main_window.chat_window
    assert chat is not None
    qtbot.waitUntil(lambda: "is not downloaded yet" in chat.banner.text(), timeout=30_000)
    assert chat.banner.text().startswith("mtp-studio/Qwen3.6-27B-mlx-4bit is not downloaded yet")


def test_an_entry_without_sidecar_explains_why_it_cannot_be_published(
    main_window: MainWindow, my_catalog: Path
) -> None:
    main_window.browser.merge_file(my_catalog)
    main_window.browser.select_key("tiny-plain-8bit")
    detail = main_window.browser.detail
    assert not detail.publish_button.isEnabled()
    assert detail.publish_button.toolTip() == (
        "no MTP sidecar configured for tiny-plain-8bit; add mtp_source_repo and "
        "mtp_sidecar_repo to the catalog entry"
    )
    assert not detail.download_sidecar_button.isEnabled()
    assert detail.download_model_button.isEnabled()


def test_editing_validates_as_you_type_and_saves_atomically(
    main_window: MainWindow, qtbot, my_catalog: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    browser = main_window.browser
    browser.merge_file(my_catalog)
    browser.select_key("tiny-mtp-4bit")
    assert browser.detail.edit_button.isEnabled()
    qtbot.mouseClick(browser.detail.edit_button, Qt.MouseButton.LeftButton)
    editor = browser.findChild(EntryEditor)
    assert editor is not None and editor.isVisible()
    ok = editor.buttons.button(QDialogButtonBox.StandardButton.Ok)
    assert ok.isEnabled()

    hf_repo = editor.edits["hf_repo"]
    hf_repo.clear()
    qtbot.keyClicks(hf_repo, "acme/Tiny-Plain-8bit")  # already used by another entry
    assert not ok.isEnabled()
    assert editor.messages["hf_repo"].isVisibleTo(editor)
    assert "acme/Tiny-Plain-8bit" in editor.messages["hf_repo"].text()
    hf_repo.setText("not a repo")
    assert "is not a Hub repo id" in editor.messages["hf_repo"].text()
    hf_repo.setText("acme/Tiny-MTP-4bit-v2")
    assert ok.isEnabled()
    assert not editor.messages["hf_repo"].isVisibleTo(editor)
    editor.edits["tier"].setText("medium")
    qtbot.mouseClick(ok, Qt.MouseButton.LeftButton)

    assert browser.modified
    assert main_window.windowTitle() == "MTP Studio — mine.yaml *"
    assert browser.detail.key == "tiny-mtp-4bit"
    assert my_catalog.read_text() == MY_CATALOG, "nothing is written before Save"

    # The catalog still has errors (Broken_Key): saving is refused and the file is untouched.
    shown: list[str] = []
    monkeypatch.setattr(
        "app.ui.catalog.browser.show_error", lambda _parent, _title, exc: shown.append(str(exc))
    )
    assert not browser.save()
    assert shown[0].startswith("the catalog has 2 error(s)")
    assert my_catalog.read_text() == MY_CATALOG

    editor = browser.edit_entry("Broken_Key")
    assert editor is not None
    assert not editor.buttons.button(QDialogButtonBox.StandardButton.Ok).isEnabled()
    editor.edits["key"].setText("broken-fixed")
    editor.edits["mtp_sidecar_repo"].setText("acme/tiny-mtp-mtp")
    assert editor.problems == []
    editor.accept()
    assert browser.save()
    assert not browser.modified
    assert main_window.windowTitle() == "MTP Studio — mine.yaml"

    saved = my_catalog.read_text()
    assert "hf_repo: acme/Tiny-MTP-4bit-v2" in saved
    assert "key: broken-fixed" in saved
    assert "notes: keep me  # a field MTP Studio does not know" in saved
    assert saved.startswith("# my own models\n")
    assert sorted(p.name for p in my_catalog.parent.iterdir() if p.is_file()) == ["mine.yaml"]
    reopened = Catalog.open([my_catalog])
    assert reopened.entry("tiny-mtp-4bit").tier == "medium"


def test_a_new_catalog_file_takes_new_entries(main_window: MainWindow, home: IsolatedHome) -> None:
    browser = main_window.browser
    path = home.root / "fresh.yaml"
    assert browser.create_file(path)
    assert browser.user_files() == [path]
    assert main_window.settings.catalog_files == ("(bundled)", str(path))
    editor = browser.new_entry()
    assert editor is not None
    values = {
        "key": "fresh-model-4bit",
        "source_model": "acme/Fresh",
        "quant": "4bit",
        "tier": "small",
        "output_name": "Fresh-4bit",
        "hf_repo": "acme/Fresh-4bit",
    }
    for name, value in values.items():
        editor.edits[name].setText(value)
    assert editor.problems == []
    editor.accept()
    assert browser.save()
    assert Catalog.open([path]).entry("fresh-model-4bit").slices == ("full",)


@pytest.mark.slow
def test_the_open_catalog_files_come_back_after_a_restart(
    open_window: Callable[..., MainWindow], my_catalog: Path
) -> None:
    first = open_window()
    first.browser.merge_file(my_catalog)
    first.shutdown()
    again = open_window(first.dirs)
    assert again.browser.paths == [default_catalog_path(), my_catalog]
    assert "tiny-plain-8bit" in visible_keys(again)


def test_sidecar_status_is_checked_on_the_hub_in_the_background(
    local_hub: LocalHub, main_window: MainWindow, qtbot, my_catalog: Path
) -> None:
    local_hub.seed_files("acme/tiny-mtp-mtp", {"mtp.safetensors": b"heads" * 100})
    main_window.status_book.set_endpoint(local_hub.endpoint)
    main_window.browser.merge_file(my_catalog)
    model = main_window.browser.model

    def sidecar_of(key: str) -> str:
        return model.index_of_key(key).siblingAtColumn(SIDECAR_COL).data()

    qtbot.waitUntil(lambda: sidecar_of("tiny-mtp-4bit") == "published", timeout=10_000)
    assert sidecar_of("tiny-plain-8bit") == "missing"
    # Bundled entries' sidecars do not exist on this hub: configured, not published.
    qtbot.waitUntil(lambda: sidecar_of("qwen3-6-27b-mlx-4bit") == "configured", timeout=10_000)
    tooltip = (
        model.index_of_key("qwen3-6-27b-mlx-4bit")
        .siblingAtColumn(SIDECAR_COL)
        .data(Qt.ItemDataRole.ToolTipRole)
    )
    assert tooltip == f"Configured, not published on {local_hub.endpoint} yet: publish the sidecar."
    # The answer is remembered for the next start (offline start shows the last known status).
    cache = main_window.dirs.cache / "sidecar-status.json"
    qtbot.waitUntil(cache.exists)
    assert '"acme/tiny-mtp-mtp": {"published": "yes"' in cache.read_text()


def test_an_unreachable_hub_never_blocks_and_says_so(
    main_window: MainWindow, qtbot, my_catalog: Path
) -> None:
    main_window.status_book.set_endpoint("http://127.0.0.1:9")
    main_window.browser.merge_file(my_catalog)
    index = main_window.browser.model.index_of_key("tiny-mtp-4bit").siblingAtColumn(SIDECAR_COL)
    qtbot.waitUntil(
        lambda: (
            "Could not ask http://127.0.0.1:9" in (index.data(Qt.ItemDataRole.ToolTipRole) or "")
        ),
        timeout=10_000,
    )
    assert index.data() == "configured"
