"""Renders a sample window in the app's light and dark look to PNGs, to look at the look.

Why: colours, paddings and icons only prove themselves on screen. The sample holds every style
hook of :mod:`app.ui.look` (sidebar, card, page title and subtitle, primary button, badge, muted
and tone labels) next to the plain widgets pages use (inputs, table, tabs, progress bars), and a
card with every icon. The switch from light to dark happens in the running window, through the
ThemeManager, the way the app's toggle does it. Run it under Xvfb for real fonts:

    xvfb-run -a -s "-screen 0 1600x1000x24" .venv/bin/python tools/look_book.py --out /tmp/look
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from PySide6.QtCore import QSize
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QCheckBox,
    QComboBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QProgressBar,
    QPushButton,
    QRadioButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.ui.icons import ICON_NAMES, icon  # noqa: E402
from app.ui.look import ThemeManager  # noqa: E402

PAGES = (
    ("home", "Home"),
    ("models", "Models"),
    ("catalog", "Catalog"),
    ("chat", "Chat"),
    ("jobs", "Jobs"),
    ("server", "Server"),
)
MODELS = (
    ("demo-mtp.gguf", "GGUF", "Q8_0", "18.4 MB", "MTP head"),
    ("demo-mtp-hf", "safetensors", "BF16", "35.1 MB", "MTP head"),
    ("Qwen3-6B-mlx-4bit", "MLX", "4bit", "3.4 GB", "sidecar paired"),
    ("Qwen3-6B-Q4_K_M.gguf", "GGUF", "Q4_K_M", "3.8 GB", "no head"),
)


def label(text: str, name: str = "", **properties: str) -> QLabel:
    widget = QLabel(text)
    if name:
        widget.setObjectName(name)
    for key, value in properties.items():
        widget.setProperty(key, value)
    return widget


def sidebar() -> QListWidget:
    pages = QListWidget()
    pages.setObjectName("sidebar")
    pages.setFixedWidth(210)
    pages.setIconSize(QSize(20, 20))
    for name, text in (*PAGES, ("settings", "Settings")):
        pages.addItem(QListWidgetItem(icon(name), text))
    pages.setCurrentRow(1)
    return pages


def card(*rows: QWidget | QHBoxLayout) -> QFrame:
    frame = QFrame()
    frame.setObjectName("card")
    layout = QVBoxLayout(frame)
    layout.setContentsMargins(18, 16, 18, 16)
    layout.setSpacing(10)
    for row in rows:
        if isinstance(row, QHBoxLayout):
            layout.addLayout(row)
        else:
            layout.addWidget(row)
    return frame


def row(*widgets: QWidget, stretch: bool = True) -> QHBoxLayout:
    layout = QHBoxLayout()
    layout.setSpacing(8)
    for widget in widgets:
        layout.addWidget(widget)
    if stretch:
        layout.addStretch(1)
    return layout


def buttons() -> QHBoxLayout:
    chat = QPushButton(icon("play", QPalette.ColorRole.HighlightedText), "Chat with the demo model")
    chat.setProperty("primary", "true")
    download = QPushButton(icon("download"), "Download sidecar")
    publish = QPushButton(icon("upload"), "Publish")
    publish.setEnabled(False)
    disabled_primary = QPushButton("Graft")
    disabled_primary.setProperty("primary", "true")
    disabled_primary.setEnabled(False)
    tools = []
    for name, tip in (("copy", "Copy"), ("folder", "Reveal"), ("trash", "Delete")):
        tool = QToolButton()
        tool.setIcon(icon(name))
        tool.setToolTip(tip)
        tools.append(tool)
    return row(chat, download, publish, disabled_primary, *tools)


def inputs() -> QHBoxLayout:
    search = QLineEdit()
    search.setPlaceholderText("Search models…")
    search.addAction(icon("search"), QLineEdit.ActionPosition.LeadingPosition)
    search.setMinimumWidth(240)
    backend = QComboBox()
    backend.addItems(["auto", "llama.cpp", "mlx"])
    depth = QSpinBox()
    depth.setRange(1, 4)
    depth.setValue(2)
    depth.setPrefix("depth ")
    mtp = QCheckBox("Draft with MTP")
    mtp.setChecked(True)
    compare = QCheckBox("Compare")
    greedy = QRadioButton("Greedy")
    greedy.setChecked(True)
    sampled = QRadioButton("Sampled")
    return row(search, backend, depth, mtp, compare, greedy, sampled)


def table() -> QTableWidget:
    view = QTableWidget(len(MODELS), 5)
    view.setHorizontalHeaderLabels(["Model", "Format", "Quant", "Size on disk", "MTP"])
    for r, values in enumerate(MODELS):
        for c, value in enumerate(values):
            view.setItem(r, c, QTableWidgetItem(value))
    view.verticalHeader().setVisible(False)
    view.setShowGrid(False)
    view.setAlternatingRowColors(True)
    view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    view.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
    view.selectRow(1)
    view.setMinimumHeight(190)
    return view


class IconGrid(QWidget):
    """Every icon as a plain pixmap, the case that does not re-tint by itself: it redraws on
    ``ThemeManager.changed``, as a page must for pixmaps it keeps."""

    def __init__(self) -> None:
        super().__init__()
        grid = QGridLayout(self)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setHorizontalSpacing(14)
        grid.setVerticalSpacing(6)
        self.cells: dict[str, QLabel] = {}
        for index, name in enumerate(ICON_NAMES):
            cell = QLabel()
            cell.setToolTip(name)
            grid.addWidget(cell, index // 15, index % 15)
            self.cells[name] = cell
        self.refresh()

    def refresh(self, _scheme: str = "") -> None:
        for name, cell in self.cells.items():
            cell.setPixmap(icon(name).pixmap(QSize(24, 24), self.devicePixelRatioF()))


def content(icons: IconGrid) -> QWidget:
    page = QWidget()
    layout = QVBoxLayout(page)
    layout.setContentsMargins(28, 22, 28, 22)
    layout.setSpacing(14)
    layout.addLayout(row(label("Models", "pageTitle"), label("MTP ×1.8 faster", "badge")))
    layout.addWidget(label("Every model on disk, with its MTP head and size.", "pageSubtitle"))
    layout.addLayout(inputs())
    layout.addWidget(table())
    tabs = QTabWidget()
    details = card(
        label("demo-mtp-hf", "sectionTitle"),
        label("~/.cache/huggingface/hub · BF16 · 2 MTP layers", "muted"),
        buttons(),
        row(label("Sidecar published", tone="success"), label("Low disk space", tone="warning")),
        row(label("Checksum mismatch in mtp.safetensors", tone="error")),
    )
    tabs.addTab(details, icon("info"), "Details")
    tabs.addTab(QWidget(), icon("jobs"), "Jobs")
    layout.addWidget(tabs)
    progress = QProgressBar()
    progress.setValue(62)
    thin = QProgressBar()
    thin.setValue(35)
    thin.setTextVisible(False)
    layout.addLayout(row(label("Downloading…"), progress, stretch=False))
    layout.addWidget(thin)
    layout.addWidget(card(label("Icons", "sectionTitle"), icons))
    layout.addStretch(1)
    return page


def sample_window(icons: IconGrid) -> QMainWindow:
    window = QMainWindow()
    window.setWindowTitle("MTP Studio — look book")
    body = QWidget()
    layout = QHBoxLayout(body)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setSpacing(0)
    layout.addWidget(sidebar())
    layout.addWidget(content(icons), 1)
    window.setCentralWidget(body)
    for title in ("File", "View", "Help"):
        window.menuBar().addMenu(title)
    window.statusBar().showMessage("Ready · llama.cpp on CPU")
    return window


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "scratch" / "look")
    parser.add_argument("--size", default="1280x900", help="window size, WIDTHxHEIGHT")
    args = parser.parse_args()
    width, height = (int(part) for part in args.size.split("x"))
    os.environ.setdefault("QT_QPA_PLATFORM", "xcb" if os.environ.get("DISPLAY") else "offscreen")
    app = QApplication(sys.argv[:1])
    themes = ThemeManager(app, "light")
    icons = IconGrid()
    themes.changed.connect(icons.refresh)
    window = sample_window(icons)
    window.resize(width, height)
    window.show()
    args.out.mkdir(parents=True, exist_ok=True)
    for choice in ("light", "dark"):
        themes.set_choice(choice)
        for _ in range(5):
            app.processEvents()
        path = args.out / f"look-{choice}.png"
        window.grab().save(str(path))
        print(path)
    window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
