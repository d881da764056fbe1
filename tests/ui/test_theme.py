"""The look: light and dark palettes that differ and read well, the style hooks pages use, the
"system" choice following the OS, and the theme choice kept in the settings."""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import QEvent, QPoint, QSize, Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.settings import Settings, SettingsError, SettingsStore
from app.ui.look import SCHEMES, THEMES, ThemeManager, apply_theme, scheme_for
from app.ui.look.theme import MIN_BASE_POINT_SIZE
from tests.windows import release_deleted_widgets

Role = QPalette.ColorRole
Group = QPalette.ColorGroup
AA = 4.5  # WCAG AA for normal text

# (text role, background role): every pairing the app draws text with
TEXT_ON_BACKGROUND = [
    (Role.WindowText, Role.Window),
    (Role.Text, Role.Base),
    (Role.Text, Role.AlternateBase),
    (Role.ButtonText, Role.Button),
    (Role.HighlightedText, Role.Highlight),
    (Role.PlaceholderText, Role.Base),
    (Role.PlaceholderText, Role.Window),
    (Role.Link, Role.Base),
    (Role.Link, Role.Window),
    (Role.ToolTipText, Role.ToolTipBase),
]


def luminance(color: QColor) -> float:
    def channel(value: float) -> float:
        return value / 12.92 if value <= 0.03928 else ((value + 0.055) / 1.055) ** 2.4

    return (
        0.2126 * channel(color.redF())
        + 0.7152 * channel(color.greenF())
        + 0.0722 * channel(color.blueF())
    )


def contrast(first: QColor, second: QColor) -> float:
    lighter, darker = sorted((luminance(first), luminance(second)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def all_roles() -> list[QPalette.ColorRole]:
    return [role for role in Role if role not in (Role.NoRole, Role.NColorRoles)]


def settle(app: QApplication) -> None:
    for _ in range(3):
        app.processEvents()


def test_light_and_dark_palettes_differ_and_every_text_reads_well(restored_look) -> None:
    app = restored_look
    seen: dict[str, QPalette] = {}
    for choice in ("light", "dark"):
        assert apply_theme(app, choice) == choice
        palette = app.palette()
        seen[choice] = palette
        for text, background in TEXT_ON_BACKGROUND:
            ratio = contrast(palette.color(text), palette.color(background))
            assert ratio >= AA, f"{choice}: {text.name} on {background.name} is {ratio:.2f}:1"
        colors = SCHEMES[choice]
        for tone in (colors.error, colors.success, colors.warning):
            for background in (Role.Base, Role.Window):
                ratio = contrast(QColor(tone), palette.color(background))
                assert ratio >= AA, f"{choice}: tone {tone} on {background.name} is {ratio:.2f}:1"
        for group in (Group.Active, Group.Inactive, Group.Disabled):
            unset = [role.name for role in all_roles() if not palette.isBrushSet(group, role)]
            assert not unset, f"{choice}: {group.name} roles left to Qt's defaults: {unset}"
        enabled = contrast(palette.color(Group.Active, Role.Text), palette.color(Role.Base))
        disabled = contrast(palette.color(Group.Disabled, Role.Text), palette.color(Role.Base))
        assert disabled < enabled / 2, f"{choice}: disabled text must look disabled"
    assert seen["light"].color(Role.Window).lightness() > 200
    assert seen["dark"].color(Role.Window).lightness() < 60
    assert seen["light"].color(Role.Text).lightness() < 60
    assert seen["dark"].color(Role.Text).lightness() > 200
    assert seen["light"].color(Role.Highlight) == seen["dark"].color(Role.Highlight)  # one accent


def test_the_base_font_is_at_least_ten_points(restored_look) -> None:
    apply_theme(restored_look, "light")
    assert restored_look.font().pointSizeF() >= MIN_BASE_POINT_SIZE


def sample_page() -> tuple[QWidget, dict[str, QWidget]]:
    page = QWidget()
    layout = QVBoxLayout(page)
    sidebar = QListWidget()
    sidebar.setObjectName("sidebar")
    for text in ("Home", "Models"):
        sidebar.addItem(QListWidgetItem(text))
    sidebar.setCurrentRow(1)
    card = QFrame()
    card.setObjectName("card")
    card.setMinimumSize(QSize(200, 60))
    title = QLabel("Models")
    title.setObjectName("pageTitle")
    badge = QLabel("MTP ×1.8 faster")
    badge.setObjectName("badge")
    primary = QPushButton("Chat")
    primary.setProperty("primary", "true")
    plain = QPushButton("Reveal")
    for widget in (sidebar, card, title, badge, primary, plain):
        layout.addWidget(widget)
    parts = {"sidebar": sidebar, "card": card, "title": title, "badge": badge}
    return page, {**parts, "primary": primary, "plain": plain}


def colour_at(widget: QWidget, point: QPoint) -> QColor:
    return widget.grab().toImage().pixelColor(point)


def near(first: QColor, second: QColor, tolerance: int = 6) -> bool:
    return all(
        abs(a - b) <= tolerance
        for a, b in zip(first.getRgb()[:3], second.getRgb()[:3], strict=True)
    )


@pytest.mark.parametrize("choice", ["light", "dark"])
def test_the_style_hooks_show_on_screen(restored_look, qtbot, choice: str) -> None:
    """The hooks pages use draw what the module docstring promises, after a switch too (the
    stylesheet's palette() references follow the new palette)."""
    app = restored_look
    apply_theme(app, "dark" if choice == "light" else "light")  # start from the other one
    page, parts = sample_page()
    qtbot.addWidget(page)
    page.resize(400, 500)
    page.show()
    apply_theme(app, choice)
    settle(app)
    colors = SCHEMES[choice]
    card = parts["card"]
    assert near(colour_at(card, card.rect().center()), QColor(colors.base))
    primary, plain = parts["primary"], parts["plain"]
    assert near(colour_at(primary, QPoint(4, primary.height() // 2)), QColor(colors.accent))
    assert near(colour_at(plain, QPoint(4, plain.height() // 2)), QColor(colors.button))
    badge = parts["badge"]
    assert near(colour_at(badge, QPoint(badge.width() // 2, 2)), QColor(colors.accent))
    sidebar: QListWidget = parts["sidebar"]  # type: ignore[assignment]
    selected = sidebar.visualItemRect(sidebar.item(1)).center()
    assert near(colour_at(sidebar.viewport(), QPoint(8, selected.y())), QColor(colors.accent))
    base = app.font().pointSizeF()
    assert parts["title"].font().pointSizeF() == pytest.approx(base * 1.7, abs=0.1)
    assert parts["title"].font().weight() >= 600


def test_system_follows_the_os_scheme_and_a_forced_choice_ignores_it(restored_look) -> None:
    """The offscreen platform keeps ``colorScheme()`` at Unknown whatever
    ``setColorScheme`` asks, so the OS switching is driven by emitting Qt's own
    ``colorSchemeChanged`` signal, the one the manager listens to."""
    app = restored_look
    hints = QGuiApplication.styleHints()
    themes = ThemeManager(app, "system")
    announced: list[str] = []
    themes.changed.connect(announced.append)
    try:
        assert themes.scheme == "light"  # Unknown (no OS preference) shows light
        hints.colorSchemeChanged.emit(Qt.ColorScheme.Dark)
        assert themes.scheme == "dark"
        assert app.palette().color(Role.Window) == QColor(SCHEMES["dark"].window)
        hints.colorSchemeChanged.emit(Qt.ColorScheme.Light)
        assert app.palette().color(Role.Window) == QColor(SCHEMES["light"].window)
        assert announced == ["dark", "light"]

        assert themes.set_choice("dark") == "dark"
        hints.colorSchemeChanged.emit(Qt.ColorScheme.Light)
        assert themes.scheme == "dark"
        assert app.palette().color(Role.Window) == QColor(SCHEMES["dark"].window)
        assert announced == ["dark", "light", "dark"]

        themes.set_choice("system")  # back to the OS, which said Unknown all along
        assert announced[-1] == "light"
        assert themes.choice == "system"
    finally:
        themes.deleteLater()
        QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


def test_a_closed_window_leaves_no_theme_manager_behind(restored_look, open_window) -> None:
    """The main window's theme manager belongs to the application (it follows the OS scheme);
    shutting the window down releases it, so closed windows do not keep restyling the app."""
    app = restored_look
    before = len(app.findChildren(ThemeManager))
    window = open_window()
    assert len(app.findChildren(ThemeManager)) == before + 1
    window.shutdown()
    release_deleted_widgets()
    assert len(app.findChildren(ThemeManager)) == before


def test_scheme_for_a_choice() -> None:
    assert scheme_for("system", Qt.ColorScheme.Dark) == "dark"
    assert scheme_for("system", Qt.ColorScheme.Light) == "light"
    assert scheme_for("system", Qt.ColorScheme.Unknown) == "light"
    assert scheme_for("light", Qt.ColorScheme.Dark) == "light"
    assert scheme_for("dark", Qt.ColorScheme.Light) == "dark"


def test_an_unknown_theme_is_refused_with_the_choices(restored_look) -> None:
    with pytest.raises(SettingsError, match=r"theme 'purple' is unknown.*system, light, dark"):
        apply_theme(restored_look, "purple")
    with pytest.raises(SettingsError, match="'sepia'"):
        ThemeManager(restored_look, "sepia")


def test_the_theme_choice_is_saved_and_checked(home) -> None:
    store = SettingsStore()
    assert store.load().theme == "system"
    assert THEMES == ("system", "light", "dark")
    store.update(theme="dark")
    assert SettingsStore().load().theme == "dark"
    assert json.loads(store.path.read_text())["theme"] == "dark"

    with pytest.raises(SettingsError, match=r"theme 'blue' is unknown; choose one of system"):
        store.update(theme="blue")
    assert SettingsStore().load().theme == "dark", "a refused value is not written"

    document = json.loads(store.path.read_text())
    del document["theme"]  # a file from before the theme setting
    store.path.write_text(json.dumps(document))
    assert SettingsStore().load() == Settings(theme="system")

    store.path.write_text(json.dumps({**document, "theme": "neon"}))
    with pytest.raises(SettingsError, match=rf"{store.path.name}.*theme 'neon' is unknown"):
        SettingsStore().load()
    store.path.write_text(json.dumps({**document, "theme": 2}))
    with pytest.raises(SettingsError, match=r"field 'theme' must be a str, got 2"):
        SettingsStore().load()
