"""The application stylesheet: the spacing, shapes and typography of a current desktop app.

Why one sheet for the whole app: pages stay free of inline styles and only name what a widget
*is* (``objectName`` or a dynamic property, listed in :mod:`app.ui.look`); how it looks is
decided here once. Colours are ``palette(...)`` references wherever a palette role exists, so the
same rules serve light and dark; the few colours a palette has no role for (hover tint, status
tones) come from the scheme's :class:`~app.ui.look.colors.SchemeColors`. Font sizes of headings
are derived from the base font, so they scale with the user's font choice.

Two renderings of the one sheet (see :mod:`app.ui.look.theme` for why): :func:`window_stylesheet`
with the scheme's exact colours, set on each window, and :func:`shared_stylesheet`, the same rules
with those few colours replaced by the nearest palette roles, set once on the application for
what no window holds (tooltips, a message box without a parent). A tooltip is drawn in the base
and text colours: Qt's style sheets have no ``palette(tool-tip-base)``, and the rule that named
it painted tooltips blank in the light scheme and faint in the dark one.
"""

from __future__ import annotations

from string import Template

from PySide6.QtGui import QColor

from app.ui.look.colors import SchemeColors
from app.ui.resources import RESOURCES

# Arrows of combo boxes and spin boxes, the check mark and the radio dot: a stylesheet can only
# draw them from files. Arrows are a mid grey that keeps 3:1 against the input background of
# both schemes; the mark and the dot are white, drawn on the accent (white on it in both).
CONTROLS = RESOURCES / "icons" / "controls"

_SHEET = Template(
    """
QToolTip {
    background: palette(base); color: palette(text);
    border: 1px solid palette(mid); border-radius: 6px; padding: 5px 8px;
}

/* Inputs */
QLineEdit, QPlainTextEdit, QTextEdit, QSpinBox, QDoubleSpinBox, QComboBox {
    background: palette(base); border: 1px solid palette(mid); border-radius: 6px;
    padding: 5px 8px; selection-background-color: palette(highlight);
    selection-color: palette(highlighted-text);
}
QPlainTextEdit, QTextEdit { padding: 4px; }
QLineEdit:hover, QPlainTextEdit:hover, QTextEdit:hover, QSpinBox:hover, QDoubleSpinBox:hover,
QComboBox:hover { border-color: $strong_border; }
QLineEdit:focus, QPlainTextEdit:focus, QTextEdit:focus, QSpinBox:focus, QDoubleSpinBox:focus,
QComboBox:focus { border: 1px solid palette(highlight); }
QLineEdit:disabled, QPlainTextEdit:disabled, QTextEdit:disabled, QSpinBox:disabled,
QDoubleSpinBox:disabled, QComboBox:disabled {
    background: palette(window); border-color: palette(midlight);
}
QTextEdit[readOnly="true"], QPlainTextEdit[readOnly="true"] { border-color: palette(midlight); }
QTextBrowser[fitted="true"] { border: none; background: transparent; padding: 0; }
QComboBox { padding-right: 24px; }
QComboBox::drop-down {
    subcontrol-origin: padding; subcontrol-position: center right; width: 24px; border: none;
}
QComboBox::down-arrow { image: url("$chevron_down"); width: 12px; height: 12px; }
QComboBox::down-arrow:on { image: url("$chevron_up"); }
QSpinBox, QDoubleSpinBox { padding-left: 8px; padding-right: 22px; }
QSpinBox::up-button, QDoubleSpinBox::up-button, QSpinBox::down-button,
QDoubleSpinBox::down-button {
    subcontrol-origin: border; width: 20px; border: none; background: transparent;
}
QSpinBox::up-button, QDoubleSpinBox::up-button {
    subcontrol-position: top right; margin: 3px 3px 0 0; border-top-right-radius: 4px;
}
QSpinBox::down-button, QDoubleSpinBox::down-button {
    subcontrol-position: bottom right; margin: 0 3px 3px 0; border-bottom-right-radius: 4px;
}
QSpinBox::up-button:hover, QDoubleSpinBox::up-button:hover, QSpinBox::down-button:hover,
QDoubleSpinBox::down-button:hover { background: $hover; }
QSpinBox::up-arrow, QDoubleSpinBox::up-arrow {
    image: url("$chevron_up"); width: 10px; height: 10px;
}
QSpinBox::down-arrow, QDoubleSpinBox::down-arrow {
    image: url("$chevron_down"); width: 10px; height: 10px;
}
QComboBox QAbstractItemView {
    background: palette(base); border: 1px solid palette(mid); border-radius: 6px; padding: 4px;
    outline: 0;
}

QCheckBox, QRadioButton { spacing: 8px; }
QCheckBox::indicator, QRadioButton::indicator {
    width: 16px; height: 16px; background: palette(base); border: 1px solid $strong_border;
}
QCheckBox::indicator { border-radius: 4px; }
QRadioButton::indicator { border-radius: 9px; }
QCheckBox::indicator:hover, QRadioButton::indicator:hover { border-color: palette(highlight); }
QCheckBox::indicator:checked, QRadioButton::indicator:checked {
    background: palette(highlight); border-color: palette(highlight);
}
QCheckBox::indicator:checked { image: url("$check_mark"); }
QRadioButton::indicator:checked { image: url("$radio_dot"); }
QCheckBox::indicator:disabled, QRadioButton::indicator:disabled {
    background: palette(window); border-color: palette(midlight);
}
QCheckBox::indicator:checked:disabled, QRadioButton::indicator:checked:disabled {
    background: $disabled_accent; border-color: $disabled_accent;
}

/* Buttons */
QPushButton {
    background: palette(button); border: 1px solid palette(mid); border-radius: 6px;
    padding: 6px 14px; min-height: 18px;
}
QPushButton:hover { background: $hover; border-color: $strong_border; }
QPushButton:pressed, QPushButton:checked { background: palette(midlight); }
QPushButton:focus { border-color: palette(highlight); }
QPushButton:disabled { background: palette(window); border-color: palette(midlight); }
QPushButton[primary="true"] {
    background: palette(highlight); color: palette(highlighted-text);
    border: 1px solid palette(highlight); font-weight: 600;
}
QPushButton[primary="true"]:hover, QPushButton[primary="true"]:focus {
    background: $accent_hover; border-color: $accent_hover;
}
QPushButton[primary="true"]:pressed { background: palette(highlight); }
QPushButton[primary="true"]:disabled {
    background: $disabled_accent; border-color: $disabled_accent; color: $disabled_accent_text;
}
QToolButton {
    background: transparent; border: 1px solid transparent; border-radius: 6px; padding: 4px;
}
QToolButton:hover { background: $hover; }
QToolButton:pressed, QToolButton:checked { background: palette(midlight); }

/* Lists, tables, trees */
QListView, QTreeView, QTableView {
    background: palette(base); alternate-background-color: palette(alternate-base);
    border: 1px solid palette(midlight); border-radius: 8px; gridline-color: palette(midlight);
    selection-background-color: palette(highlight); selection-color: palette(highlighted-text);
    outline: 0;
}
QTreeView::item, QListView::item { padding: 4px 2px; }
QTableView::item { padding: 2px 6px; }
QTreeView::item:hover:!selected, QListView::item:hover:!selected,
QTableView::item:hover:!selected { background: $hover; }
QHeaderView { background: transparent; }
QHeaderView::section {
    background: palette(base); color: palette(placeholder-text); font-weight: 600;
    border: none; border-bottom: 1px solid palette(midlight); padding: 6px 8px;
}
QTableCornerButton::section { background: palette(base); border: none; }

/* The sidebar: QListWidget#sidebar, one item per page, icon + text */
QFrame#sidebarPanel { border: none; border-right: 1px solid palette(midlight); }
QListWidget#sidebar {
    background: palette(window); border: none; border-radius: 0; padding: 4px 2px;
    icon-size: 20px;
}
QListWidget#sidebar::item {
    color: palette(window-text); padding: 9px 12px; margin: 1px 0; border: none;
    border-radius: 8px;
}
QListWidget#sidebar::item:hover:!selected { background: $hover; }
QListWidget#sidebar::item:selected {
    background: palette(highlight); color: palette(highlighted-text);
}

/* Panels, headings, labels */
QFrame#card {
    background: palette(base); border: 1px solid palette(midlight); border-radius: 12px;
}
QLabel#pageTitle { font-size: ${title_pt}pt; font-weight: 600; }
QLabel#pageSubtitle { font-size: ${subtitle_pt}pt; color: palette(placeholder-text); }
QLabel#sectionTitle { font-size: ${section_pt}pt; font-weight: 600; }
QLabel#muted { color: palette(placeholder-text); }
QLabel#badge {
    background: palette(highlight); color: palette(highlighted-text); font-weight: 600;
    font-size: ${badge_pt}pt; border-radius: ${badge_radius}px; padding: 2px 9px;
}
QLabel#replySummary, QLabel#replyFigures, QLabel#replyPrompt, QLabel#replySpeed,
QLabel#codeLanguage, QLabel#versionLabel { color: palette(placeholder-text); }
QLabel#mtpBadge {
    background: palette(highlight); color: palette(highlighted-text); font-weight: 600;
    border-radius: 8px; padding: 1px 8px;
}
QLabel[tone="muted"] { color: palette(placeholder-text); }
QLabel[tone="warning"] { color: $warning; }
QLabel[tone="error"] { color: $error; }
QLabel[tone="success"] { color: $success; }

QGroupBox {
    border: 1px solid palette(midlight); border-radius: 10px; margin-top: 18px;
    padding: 14px 10px 10px 10px; font-weight: 600;
}
QGroupBox::title { subcontrol-origin: margin; left: 12px; padding: 0 4px; }

/* Tabs */
QTabWidget::pane {
    background: palette(base); border: 1px solid palette(midlight); border-radius: 8px; top: -1px;
}
QTabBar::tab {
    background: transparent; color: palette(placeholder-text); border: none;
    border-bottom: 2px solid transparent; padding: 7px 14px; margin-right: 2px;
}
QTabBar::tab:hover { color: palette(window-text); }
QTabBar::tab:selected { color: palette(window-text); border-bottom-color: palette(highlight); }

/* Menus and bars */
QMenuBar { background: palette(window); border-bottom: 1px solid palette(midlight); }
QMenuBar::item { background: transparent; padding: 5px 10px; border-radius: 6px; }
QMenuBar::item:selected { background: $hover; }
QMenu {
    background: palette(base); border: 1px solid palette(mid); border-radius: 8px; padding: 4px;
}
QMenu::item { padding: 6px 28px 6px 12px; border-radius: 5px; }
QMenu::item:selected { background: palette(highlight); color: palette(highlighted-text); }
QMenu::item:disabled { color: palette(placeholder-text); }
QMenu::separator { height: 1px; background: palette(midlight); margin: 4px 8px; }
QMenu::icon { padding-left: 8px; }
QStatusBar { background: palette(window); border-top: 1px solid palette(midlight); }
QStatusBar::item { border: none; }
QToolBar { background: palette(window); border: none; spacing: 4px; padding: 4px; }

/* Progress, splitters, scroll bars */
QProgressBar {
    background: palette(midlight); border: none; border-radius: 6px; min-height: 12px;
    text-align: center;
}
QProgressBar::chunk { background: palette(highlight); border-radius: 6px; }
QProgressBar[textVisible="false"] { min-height: 6px; max-height: 6px; border-radius: 3px; }
QProgressBar[textVisible="false"]::chunk { border-radius: 3px; }
QMainWindow::separator { background: palette(midlight); width: 1px; height: 1px; }
QDockWidget::title { background: palette(window); padding: 6px 8px; }
QSplitter::handle { background: palette(midlight); }
QSplitter::handle:horizontal { width: 1px; }
QSplitter::handle:vertical { height: 1px; }
QScrollBar:vertical { background: transparent; width: 12px; margin: 0; }
QScrollBar:horizontal { background: transparent; height: 12px; margin: 0; }
QScrollBar::handle:vertical {
    background: palette(mid); border-radius: 4px; min-height: 28px; margin: 2px;
}
QScrollBar::handle:horizontal {
    background: palette(mid); border-radius: 4px; min-width: 28px; margin: 2px;
}
QScrollBar::handle:hover { background: $strong_border; }
QScrollBar::add-line, QScrollBar::sub-line { width: 0; height: 0; border: none; }
QScrollBar::add-page, QScrollBar::sub-page { background: none; }
QAbstractScrollArea::corner { background: transparent; border: none; }
"""
)


def _css_color(value: str) -> str:
    """``#aarrggbb`` (QColor's order) as ``rgba()``, which the stylesheet parser reads reliably."""
    color = QColor(value)
    return f"rgba({color.red()}, {color.green()}, {color.blue()}, {color.alpha()})"


SHARED_COLOURS = {
    "hover": "palette(midlight)",
    "accent_hover": "palette(highlight)",
    "disabled_accent": "palette(midlight)",
    "disabled_accent_text": "palette(placeholder-text)",
    "strong_border": "palette(dark)",
    "error": "palette(bright-text)",
    "success": "palette(link)",
    "warning": "palette(link-visited)",
}
"""What the shared sheet draws instead of a scheme's own colours (nearest palette roles)."""


def window_stylesheet(colors: SchemeColors, base_point_size: float) -> str:
    """The sheet for one scheme, with headings sized from ``base_point_size`` (the app font)."""
    return _render(
        base_point_size,
        hover=_css_color(colors.hover),
        accent_hover=colors.accent_hover,
        disabled_accent=colors.disabled_accent,
        disabled_accent_text=colors.disabled_accent_text,
        strong_border=colors.strong_border,
        error=colors.error,
        success=colors.success,
        warning=colors.warning,
    )


def shared_stylesheet(base_point_size: float) -> str:
    """The sheet with palette roles only: the same for every scheme, so it is set once."""
    return _render(base_point_size, **SHARED_COLOURS)


def _render(base_point_size: float, **colours: str) -> str:
    return _SHEET.substitute(
        chevron_down=(CONTROLS / "chevron-down.svg").as_posix(),
        chevron_up=(CONTROLS / "chevron-up.svg").as_posix(),
        check_mark=(CONTROLS / "check.svg").as_posix(),
        radio_dot=(CONTROLS / "dot.svg").as_posix(),
        title_pt=round(base_point_size * 1.7, 1),
        subtitle_pt=round(base_point_size * 1.05, 1),
        section_pt=round(base_point_size * 1.2, 1),
        badge_pt=round(base_point_size * 0.9, 1),
        badge_radius=round(base_point_size),
        **colours,
    )
