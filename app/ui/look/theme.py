"""Applying a theme choice ("system", "light" or "dark") to the running application.

Why its own module: the choice comes from the settings, the OS may change its scheme while the
app runs, and widgets that paint their own colours (code highlighting, the sidebar icons) must
hear about every switch. :func:`apply_theme` applies a choice once; :class:`ThemeManager` keeps
"system" in step with the OS and announces each switch through its ``changed`` signal.

Why a switch sets the stylesheet on each window and not on the application: Qt re-polishes every
widget once per ancestor when the application's sheet changes, so with a conversation on screen
(about 1,300 widgets) a switch took 2–2.5 s, while a window's own sheet re-polishes each of its
widgets once (about 0.5 s for the same window). So the application holds a sheet that is the same
for both schemes (palette roles only, set once: tooltips and parentless message boxes use it, and
a palette role resolves when such a short-lived widget is polished) and each window holds the
exact sheet of the scheme on screen, set again on a switch. Fusion and the font are set only when
they are not in place yet (setting the style again cost another 0.5–1 s).
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, Signal, Slot
from PySide6.QtGui import QFont, QFontDatabase, QGuiApplication
from PySide6.QtWidgets import QApplication, QWidget
from shiboken6 import getCppPointer

from app.engine.settings import THEMES, SettingsError
from app.ui.look.colors import SCHEMES, build_palette
from app.ui.look.stylesheet import shared_stylesheet, window_stylesheet

MIN_BASE_POINT_SIZE = 10.0  # Linux and Windows default to 9 pt, a size smaller than apps use now
STYLE_SET = "mtpStudioStyle"
"""Application property: the style object in place after the look was last applied."""


def check_choice(choice: str) -> None:
    """Raise :class:`SettingsError` naming the bad theme and the choices."""
    if choice not in THEMES:
        raise SettingsError(f"theme {choice!r} is unknown; choose one of {', '.join(THEMES)}")


def scheme_for(choice: str, os_scheme: Qt.ColorScheme) -> str:
    """The scheme a choice shows: "system" follows ``os_scheme`` (light when the OS says none)."""
    check_choice(choice)
    if choice != "system":
        return choice
    return "dark" if os_scheme == Qt.ColorScheme.Dark else "light"


def base_font() -> QFont:
    """The OS's general font, at least :data:`MIN_BASE_POINT_SIZE`."""
    font = QFontDatabase.systemFont(QFontDatabase.SystemFont.GeneralFont)
    if font.pointSizeF() < MIN_BASE_POINT_SIZE:
        font.setPointSizeF(MIN_BASE_POINT_SIZE)
    return font


def show_scheme(app: QApplication, scheme: str) -> None:
    """Fusion, the base font, the scheme's palette and the stylesheets (see the module)."""
    if app.property(STYLE_SET) != _style_key(app):
        app.setStyle("Fusion")  # under a stylesheet style() is a wrapper: its name says nothing
    colors = SCHEMES[scheme]
    font = base_font()
    if app.font() != font:
        app.setFont(font)
    app.setPalette(build_palette(colors))
    shared = shared_stylesheet(font.pointSizeF())
    if app.styleSheet() != shared:
        app.setStyleSheet(shared)
    exact = window_stylesheet(colors, font.pointSizeF())
    for window in styled_windows(app):
        if window.styleSheet() != exact:
            window.setStyleSheet(exact)
    app.setProperty(STYLE_SET, _style_key(app))


def styled_windows(app: QApplication) -> list[QWidget]:
    """The windows that hold the exact sheet: every window without a parent, popups aside
    (a dialog or menu with a parent takes its parent's sheet)."""
    transient = (Qt.WindowType.Popup, Qt.WindowType.ToolTip)
    return [
        widget
        for widget in app.topLevelWidgets()
        if widget.parentWidget() is None and widget.windowType() not in transient
    ]


def _style_key(app: QApplication) -> int:
    return int(getCppPointer(app.style())[0])


def tell_qt(choice: str) -> None:
    """Let native parts (dialogs, title bars) follow a forced choice; "system" lets go again."""
    hints = QGuiApplication.styleHints()
    if choice == "light":
        hints.setColorScheme(Qt.ColorScheme.Light)
    elif choice == "dark":
        hints.setColorScheme(Qt.ColorScheme.Dark)
    else:
        hints.unsetColorScheme()


def apply_theme(app: QApplication, choice: str) -> str:
    """Show ``choice`` ("system", "light" or "dark") now; return the scheme shown.

    "system" reads the OS scheme once; use :class:`ThemeManager` to keep following it.
    """
    check_choice(choice)
    tell_qt(choice)
    scheme = scheme_for(choice, QGuiApplication.styleHints().colorScheme())
    show_scheme(app, scheme)
    return scheme


class ThemeManager(QObject):
    """Owns the theme choice: applies it, follows the OS under "system", announces switches.

    ``changed(scheme)`` fires with "light" or "dark" whenever the scheme on screen changes
    (a new choice, or the OS switching while the choice is "system"), after the new palette and
    stylesheet are in place, so a slot can read ``QApplication.palette()`` right away.
    """

    changed = Signal(str)

    def __init__(self, app: QApplication, choice: str = "system") -> None:
        super().__init__(app)
        self._app = app
        self._choice = choice
        self._scheme = apply_theme(app, choice)
        QGuiApplication.styleHints().colorSchemeChanged.connect(self.follow_os_scheme)

    @property
    def choice(self) -> str:
        return self._choice

    def release(self) -> None:
        """Stop following the OS scheme and let go of this manager (the look stays as it is)."""
        QGuiApplication.styleHints().colorSchemeChanged.disconnect(self.follow_os_scheme)
        self.setParent(None)
        self.deleteLater()

    @property
    def scheme(self) -> str:
        """The scheme on screen: "light" or "dark"."""
        return self._scheme

    def set_choice(self, choice: str) -> str:
        """Switch to ``choice`` (the caller saves it in the settings); return the scheme shown."""
        check_choice(choice)
        self._choice = choice
        self._show(apply_theme(self._app, choice))
        return self._scheme

    @Slot(Qt.ColorScheme)
    def follow_os_scheme(self, os_scheme: Qt.ColorScheme) -> None:
        """The OS switched light/dark: follow it under "system", ignore it otherwise."""
        if self._choice != "system":
            return
        scheme = scheme_for("system", os_scheme)
        if scheme != self._scheme:
            show_scheme(self._app, scheme)
            self._show(scheme)

    def _show(self, scheme: str) -> None:
        """Record the scheme on screen; announce it when it differs from the last one."""
        if scheme != self._scheme:
            self._scheme = scheme
            self.changed.emit(scheme)
