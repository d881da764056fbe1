"""The main window's menu bar: File (catalog files), View (pages, theme), Models, Settings, Help.

Every action lives in a menu, so each is discoverable and each shortcut is listed in Help →
Keyboard shortcuts (read from these actions). Each shortcut means one thing wherever the focus
is: Ctrl+N is a new conversation everywhere (it opens the Chat page), a new catalog has none of
its own, and Save works on the Catalog page only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMenu

from app.ui.shell.catalog_page import CatalogPage
from app.ui.shell.look_control import THEME_CHOICES, LookControl
from app.ui.shell.pages import PAGES

Slot = Callable[[], object]
Keys = QKeySequence.StandardKey | str | None


@dataclass(frozen=True)
class MenuHandlers:
    """What the menus' actions do that is not a page's or the look's own."""

    show_page: Callable[[str], object]
    new_conversation: Slot
    open_chat: Slot
    chat_with_demo: Slot
    download: Slot
    publish: Slot
    open_settings: Slot
    open_sign_in: Slot
    show_shortcuts: Slot
    open_logs: Slot
    about: Slot


@dataclass(frozen=True)
class Menus:
    page_actions: dict[str, QAction]
    theme_actions: QActionGroup
    view_menu: QMenu


def build_menus(
    window: QMainWindow, catalog: CatalogPage, look: LookControl, handlers: MenuHandlers
) -> Menus:
    """Fill ``window``'s menu bar; return the actions other parts keep in step."""
    bar = window.menuBar()

    def add(menu: QMenu, text: str, slot: Slot, keys: Keys = None) -> QAction:
        action = QAction(text, window)
        if keys is not None:
            action.setShortcut(QKeySequence(keys))
        action.triggered.connect(lambda _checked=False: slot())
        menu.addAction(action)
        return action

    file_menu = bar.addMenu("&File")
    add(file_menu, "New &conversation", handlers.new_conversation, QKeySequence.StandardKey.New)
    file_menu.addSeparator()
    add(file_menu, "&Open catalog…", catalog.open_catalog, QKeySequence.StandardKey.Open)
    add(file_menu, "&Merge catalog…", catalog.merge_catalog)
    add(file_menu, "&New catalog…", catalog.new_catalog)
    add(file_menu, "Use the &bundled catalog only", lambda: catalog.browser.open_files([]))
    save = add(file_menu, "&Save catalog", catalog.browser.save, QKeySequence.StandardKey.Save)
    save.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
    catalog.addAction(save)  # Ctrl+S saves the catalog only while its page has the focus
    file_menu.addSeparator()
    add(file_menu, "&Quit", window.close, QKeySequence.StandardKey.Quit)

    view_menu = bar.addMenu("&View")
    page_actions = {
        spec.key: add(view_menu, f"&{spec.title}", _page_slot(handlers, spec.key), spec.shortcut)
        for spec in PAGES
    }
    view_menu.addSeparator()
    theme_menu = view_menu.addMenu("&Theme")
    theme_actions = QActionGroup(window)
    for choice, text in THEME_CHOICES:
        action = add(theme_menu, text, _theme_slot(look, choice))
        action.setCheckable(True)
        action.setChecked(choice == look.themes.choice)
        action.setData(choice)
        theme_actions.addAction(action)
    look.theme_actions = theme_actions
    add(view_menu, "Toggle &dark mode", look.toggle_dark, "Ctrl+Shift+D")

    models_menu = bar.addMenu("&Models")
    add(models_menu, "&Chat…", handlers.open_chat, "Ctrl+Shift+C")
    add(models_menu, "Chat with the &demo model", handlers.chat_with_demo)
    add(models_menu, "&Download…", handlers.download)
    add(models_menu, "&Publish sidecar…", handlers.publish)
    add(models_menu, "Publish every &missing sidecar…", catalog.publish_missing_sidecars)
    add(models_menu, "&New catalog entry…", catalog.browser.new_entry)
    add(
        models_menu,
        "&Refresh sidecar status",
        catalog.refresh_status,
        QKeySequence.StandardKey.Refresh,
    )

    settings_menu = bar.addMenu("&Settings")
    add(
        settings_menu,
        "&Preferences…",
        handlers.open_settings,
        QKeySequence.StandardKey.Preferences,
    )
    add(settings_menu, "Sign &in to the Hub…", handlers.open_sign_in)

    help_menu = bar.addMenu("&Help")
    add(help_menu, "&Keyboard shortcuts", handlers.show_shortcuts, "Ctrl+/")
    add(help_menu, "Open &logs folder", handlers.open_logs)
    add(help_menu, "&About MTP Studio", handlers.about)
    return Menus(page_actions, theme_actions, view_menu)


def _page_slot(handlers: MenuHandlers, key: str) -> Slot:
    return lambda: handlers.show_page(key)


def _theme_slot(look: LookControl, choice: str) -> Slot:
    return lambda: look.set_theme(choice)
