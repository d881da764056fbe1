"""The app's icons: one SVG set under ``resources/icons/``, drawn in the palette's text colour.

Why an icon engine rather than ``QIcon(path)``: the SVGs are drawn with ``currentColor``, which
Qt's SVG renderer does not know, and a fixed colour would vanish on one of the two schemes. The
engine here swaps in the colour of the current application palette each time Qt asks for a
pixmap, at the exact size and device pixel ratio asked for (crisp at 1×, 2× and fractional
scales), so an icon already set on a widget re-tints when the theme switches. Tinted renderers
are cached per (name, colour) and pixmaps per (name, colour, size, scale).

Modes: normal and active icons take ``role`` (window text by default), disabled ones the
disabled group's colour of that role, selected ones (a selected sidebar or list item) the
highlighted-text colour.
"""

from __future__ import annotations

from functools import cache, lru_cache

from PySide6.QtCore import QByteArray, QRect, QRectF, QSize, Qt
from PySide6.QtGui import (
    QGuiApplication,
    QIcon,
    QIconEngine,
    QPainter,
    QPalette,
    QPixmap,
)
from PySide6.QtSvg import QSvgRenderer

from app.ui.resources import RESOURCES

ICON_DIR = RESOURCES / "icons"
ICON_NAMES = (
    "bolt",
    "catalog",
    "chat",
    "check",
    "close",
    "copy",
    "download",
    "folder",
    "graft",
    "help",
    "home",
    "image",
    "info",
    "jobs",
    "key",
    "keyboard",
    "models",
    "monitor",
    "moon",
    "play",
    "plus",
    "refresh",
    "search",
    "send",
    "server",
    "settings",
    "stop",
    "sun",
    "trash",
    "upload",
    "warning",
)


@cache
def _svg_source(name: str) -> bytes:
    """The SVG text of ``name``; an unknown name or a missing file says which, and where."""
    if name not in ICON_NAMES:
        raise LookupError(
            f"no icon named {name!r} in {ICON_DIR}; the icons are: {', '.join(ICON_NAMES)}"
        )
    path = ICON_DIR / f"{name}.svg"
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise LookupError(
            f"icon {name!r} is missing: {path} does not exist; reinstall MTP Studio"
        ) from None


@lru_cache(maxsize=256)
def _renderer(name: str, color: str) -> QSvgRenderer:
    renderer = QSvgRenderer(QByteArray(_svg_source(name).replace(b"currentColor", color.encode())))
    if not renderer.isValid():
        raise ValueError(f"{ICON_DIR / (name + '.svg')} is not a valid SVG; reinstall MTP Studio")
    return renderer


@lru_cache(maxsize=1024)
def _pixmap(name: str, color: str, width: int, height: int, scale: float) -> QPixmap:
    pixmap = QPixmap(round(width * scale), round(height * scale))
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    _renderer(name, color).render(painter, QRectF(0, 0, pixmap.width(), pixmap.height()))
    painter.end()
    pixmap.setDevicePixelRatio(scale)
    return pixmap


def _color(role: QPalette.ColorRole, mode: QIcon.Mode) -> str:
    palette = QGuiApplication.palette()
    if mode == QIcon.Mode.Disabled:
        return palette.color(QPalette.ColorGroup.Disabled, role).name()
    if mode == QIcon.Mode.Selected:
        return palette.color(QPalette.ColorGroup.Active, QPalette.ColorRole.HighlightedText).name()
    return palette.color(QPalette.ColorGroup.Active, role).name()


class _TintedSvgEngine(QIconEngine):
    """Draws one named SVG in a palette colour chosen at paint time."""

    def __init__(self, name: str, role: QPalette.ColorRole) -> None:
        super().__init__()
        self._name = name
        self._role = role

    def clone(self) -> QIconEngine:
        return _TintedSvgEngine(self._name, self._role)

    def key(self) -> str:
        return "mtp-studio-tinted-svg"

    def iconName(self) -> str:
        return self._name

    def paint(self, painter: QPainter, rect: QRect, mode: QIcon.Mode, state: QIcon.State) -> None:
        _renderer(self._name, _color(self._role, mode)).render(painter, QRectF(rect))

    def pixmap(self, size: QSize, mode: QIcon.Mode, state: QIcon.State) -> QPixmap:
        return self.scaledPixmap(size, mode, state, 1.0)

    def scaledPixmap(
        self, size: QSize, mode: QIcon.Mode, state: QIcon.State, scale: float
    ) -> QPixmap:
        color = _color(self._role, mode)
        return _pixmap(self._name, color, size.width(), size.height(), scale)


@cache
def icon(name: str, role: QPalette.ColorRole = QPalette.ColorRole.WindowText) -> QIcon:
    """The icon ``name`` (one of :data:`ICON_NAMES`), drawn in the palette colour of ``role``.

    Use ``QPalette.ColorRole.HighlightedText`` for icons on the accent (primary buttons).
    Raises ``LookupError`` naming the icon and the folder when there is no such icon.
    """
    _svg_source(name)  # fail here, where the name is written, not at the first paint
    return QIcon(_TintedSvgEngine(name, role))
