"""The Models page as a user meets it (Qt offscreen): the list, the filter, the actions and their
signals, and deleting with a confirmation that names the space freed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QObject, Qt, QUrl, Slot
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QMessageBox

from app.engine.chat.history import HISTORY_FILE_NAME, HistoryStore
from app.engine.settings import Settings, SettingsStore, app_dirs
from app.engine.units import format_bytes
from app.ui.library import LibraryPage
from app.ui.library.table import COLUMNS, MODEL_ROLE, SIZE_COLUMN
from tests.graft.bases import DEMO_GGUF
from tests.library.layout import CATALOG_SIDECARS, GGUF_REPO, SIDECAR_REPO, DiskLayout

SCAN_TIMEOUT_MS = 60_000


class PageDriver:
    """The Models page on the settings saved in the test's home (as the window's settings
    source would hand them over)."""

    def __init__(self, qtbot, disk: DiskLayout | None, history: HistoryStore, demo_dir: Path):
        self.qtbot = qtbot
        self.history = history
        store = SettingsStore(app_dirs().settings_file)
        self.page = LibraryPage(app_dirs(), store.load, history, demo_dir=demo_dir)
        qtbot.addWidget(self.page)
        self.page.resize(1200, 700)
        self.page.show()
        if disk is not None:
            self.page.set_catalog_sidecars(CATALOG_SIDECARS)
        self.wait_scan()

    def wait_scan(self) -> None:
        self.qtbot.waitUntil(lambda: not self.page.scanning, timeout=SCAN_TIMEOUT_MS)

    def rows(self) -> list[tuple[str, ...]]:
        proxy = self.page.proxy
        return [
            tuple(proxy.index(row, column).data() for column in range(len(COLUMNS)))
            for row in range(proxy.rowCount())
        ]

    def shown_paths(self) -> list[Path]:
        proxy = self.page.proxy
        return [proxy.index(row, 0).data(MODEL_ROLE).path for row in range(proxy.rowCount())]

    def select(self, path: Path) -> None:
        assert self.page.select(path), f"{path} is not listed"

    def click(self, action) -> None:
        self.qtbot.mouseClick(self.page.buttons[action], Qt.MouseButton.LeftButton)

    def ask_delete(self, path: Path) -> QMessageBox:
        self.select(path)
        self.click(self.page.delete_action)
        self.qtbot.waitUntil(lambda: self.page.confirmation is not None, timeout=SCAN_TIMEOUT_MS)
        assert self.page.confirmation is not None
        return self.page.confirmation


def _history() -> HistoryStore:
    return HistoryStore(app_dirs().data / HISTORY_FILE_NAME)


@pytest.fixture
def driver(qtbot, disk: DiskLayout) -> Iterator[PageDriver]:
    SettingsStore(app_dirs().settings_file).save(Settings(models_dir=str(disk.models_dir)))
    history = _history()
    yield PageDriver(qtbot, disk, history, DEMO_GGUF.parent)
    history.close()


@pytest.mark.slow
def test_the_page_lists_every_model_with_its_columns_and_where_it_looked(
    driver: PageDriver, disk: DiskLayout
) -> None:
    page = driver.page
    assert page.title.text() == "Models"
    assert page.stack.currentWidget() is page.table
    assert len(driver.rows()) == 9  # both bundled demos and the seven models of the layout
    rows = {path: row for path, row in zip(driver.shown_paths(), driver.rows(), strict=True)}
    size = disk.folder_trunk.stat().st_size
    assert rows[disk.folder_trunk] == (
        "demo-trunk.gguf",
        "GGUF",
        "Q8_0",
        format_bytes(size),
        "Sidecar paired: trunk/mtp.safetensors",
        "Models folder",
    )
    tooltip = page.proxy.index(driver.shown_paths().index(disk.folder_trunk), 0).data(
        Qt.ItemDataRole.ToolTipRole
    )
    assert tooltip.splitlines()[:3] == [
        str(disk.folder_trunk),
        f"Models folder: {disk.models_dir}",
        f"Sidecar: {disk.folder_sidecar}",
    ]
    assert rows[disk.cached_trunk][4] == f"Sidecar not downloaded: {SIDECAR_REPO}"
    assert rows[DEMO_GGUF][4:] == ("Head inside (1 block)", "Bundled demo")
    assert rows[disk.opened_mlx][1:3] == ("MLX", "4-bit (group 64)")
    total = sum(model.size_bytes for model in page.models)
    assert page.subtitle.text() == (
        f"9 models, {format_bytes(total)} on disk. Looked in {disk.models_dir}, "
        f"{disk.hub_cache}, {disk.grafted_dir} and 2 opened file(s)."
    )


@pytest.mark.slow
def test_the_filter_narrows_the_list_and_sizes_sort_by_bytes(driver: PageDriver) -> None:
    page = driver.page
    page.search.setText("MLX")
    assert [row[0] for row in driver.rows()] == ["demo-mtp-mlx-4bit"]
    page.search.setText("sidecar")
    assert len(driver.rows()) == 2
    page.search.clear()
    assert len(driver.rows()) == 9  # both bundled demos and the seven models of the layout
    page.table.horizontalHeader().setSortIndicator(SIZE_COLUMN, Qt.SortOrder.AscendingOrder)
    sizes = [path.stat().st_size for path in driver.shown_paths() if path.is_file()]
    assert sizes == sorted(sizes)
    listed = [page.proxy.index(row, 0).data(MODEL_ROLE).size_bytes for row in range(8)]
    assert listed == sorted(listed)


@pytest.mark.slow
def test_actions_follow_the_selection_and_emit_what_the_window_needs(
    driver: PageDriver, disk: DiskLayout
) -> None:
    page = driver.page
    driver.select(disk.folder_trunk)
    assert page.graft_action.isEnabled() and not page.download_action.isEnabled()
    with driver.qtbot.waitSignal(page.graft_requested) as graft:
        driver.click(page.graft_action)
    assert graft.args == [disk.folder_trunk, disk.folder_sidecar]

    driver.select(disk.cached_trunk)
    assert page.download_action.isEnabled() and not page.graft_action.isEnabled()
    with driver.qtbot.waitSignal(page.download_sidecar_requested) as download:
        driver.click(page.download_action)
    assert download.args == [SIDECAR_REPO]

    driver.select(DEMO_GGUF)
    assert not page.delete_action.isEnabled() and not page.buttons[page.delete_action].isEnabled()
    with driver.qtbot.waitSignal(page.chat_requested) as chat:
        driver.click(page.chat_action)
    assert chat.args == [DEMO_GGUF]
    with driver.qtbot.waitSignal(page.chat_requested) as double_clicked:
        page.table.doubleClicked.emit(page.table.currentIndex())
    assert double_clicked.args == [DEMO_GGUF]


def test_the_context_menu_offers_the_same_actions(driver: PageDriver, disk: DiskLayout) -> None:
    page = driver.page
    driver.select(disk.cached_trunk)
    row = page.table.selectionModel().selectedRows()[0].row()
    position = page.table.visualRect(page.proxy.index(row, 0)).center()
    page.table.customContextMenuRequested.emit(position)
    assert page.menu is not None
    enabled = {action.text(): action.isEnabled() for action in page.menu.actions()}
    assert enabled == {
        "Chat": True,
        "Add MTP head from sidecar…": False,
        "Download sidecar": True,
        "Reveal in file manager": True,
        "Delete…": True,
    }
    page.menu.close()


class _UrlCatcher(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[QUrl] = []

    @Slot(QUrl)
    def open(self, url: QUrl) -> None:
        self.urls.append(url)


@pytest.mark.slow
def test_reveal_opens_the_models_folder_in_the_file_manager(
    driver: PageDriver, disk: DiskLayout
) -> None:
    catcher = _UrlCatcher()
    QDesktopServices.setUrlHandler("file", catcher, "open")
    try:
        driver.select(disk.folder_trunk)
        driver.click(driver.page.reveal_action)
        driver.select(disk.opened_mlx)
        driver.click(driver.page.reveal_action)
    finally:
        QDesktopServices.unsetUrlHandler("file")
    assert [Path(url.toLocalFile()) for url in catcher.urls] == [
        disk.folder_trunk.parent,
        disk.opened_mlx,
    ]


@pytest.mark.slow
def test_delete_asks_with_the_space_it_frees_then_deletes_and_refreshes(
    driver: PageDriver, disk: DiskLayout
) -> None:
    page = driver.page
    size = disk.folder_trunk.stat().st_size
    name = f"{GGUF_REPO} · demo-trunk-Q8_0.gguf"
    confirmation = driver.ask_delete(disk.cached_trunk)
    assert confirmation.text() == f"Delete {name}? This frees {format_bytes(size)}."
    assert str(disk.cached_trunk) in confirmation.informativeText()
    confirmation.button(QMessageBox.StandardButton.Cancel).click()
    assert disk.cached_trunk.is_file()

    confirmation = driver.ask_delete(disk.cached_trunk)
    confirmation.button(QMessageBox.StandardButton.Yes).click()
    driver.qtbot.waitUntil(lambda: "freed" in page.status.text(), timeout=SCAN_TIMEOUT_MS)
    driver.wait_scan()
    assert page.status.text() == f"Deleted {name}: {format_bytes(size)} freed."
    assert not disk.cached_trunk.exists()
    assert disk.cached_trunk not in driver.shown_paths() and len(driver.rows()) == 8
    assert disk.cached_q8 in driver.shown_paths()


@pytest.mark.slow
def test_a_deleted_opened_file_is_forgotten_by_the_chat_history(
    driver: PageDriver, disk: DiskLayout
) -> None:
    confirmation = driver.ask_delete(disk.opened_gguf)
    confirmation.button(QMessageBox.StandardButton.Yes).click()
    driver.qtbot.waitUntil(lambda: "freed" in driver.page.status.text(), timeout=SCAN_TIMEOUT_MS)
    driver.wait_scan()
    assert not disk.opened_gguf.exists()
    assert driver.history.opened_models() == [disk.opened_mlx]
    assert disk.opened_gguf not in driver.shown_paths()


@pytest.mark.slow
def test_a_refused_deletion_is_explained_and_nothing_is_removed(
    driver: PageDriver, disk: DiskLayout, tmp_path: Path
) -> None:
    target = tmp_path / "outside.gguf"
    target.write_bytes(disk.opened_gguf.read_bytes())
    (disk.models_dir / "link.gguf").symlink_to(target)
    driver.page.refresh()
    driver.wait_scan()
    driver.select(disk.models_dir / "link.gguf")
    driver.click(driver.page.delete_action)
    driver.qtbot.waitUntil(lambda: "Not deleted" in driver.page.status.text())
    assert "is a link to" in driver.page.status.text()
    assert driver.page.confirmation is None and target.is_file()


@pytest.mark.slow
def test_add_opened_remembers_the_file_for_the_chat_and_lists_it(
    driver: PageDriver, disk: DiskLayout, tmp_path: Path
) -> None:
    extra = tmp_path / "extra.gguf"
    extra.write_bytes(DEMO_GGUF.read_bytes())
    driver.page.add_opened(extra)
    driver.qtbot.waitUntil(lambda: extra in driver.shown_paths(), timeout=SCAN_TIMEOUT_MS)
    assert driver.history.opened_models()[0] == extra

    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a model")
    driver.page.add_opened(broken)
    driver.qtbot.waitUntil(lambda: "Not added" in driver.page.status.text())
    assert str(broken) in driver.page.status.text()
    assert broken not in driver.history.opened_models()


def test_an_empty_library_says_how_to_get_a_model(qtbot, tmp_path: Path) -> None:
    SettingsStore(app_dirs().settings_file).save(Settings(models_dir=str(tmp_path / "none")))
    history = _history()
    try:
        driver = PageDriver(qtbot, None, history, tmp_path / "no-demo")
        page = driver.page
        assert page.stack.currentWidget() is page.empty_state
        assert page.empty_state.text() == (
            "No models yet — download one from the Catalog or chat with the bundled demo."
        )
        assert not any(action.isEnabled() for action in page.actions_in_order)
    finally:
        history.close()
