"""Pictures shown small, in rows that wrap: the chat's attachments waiting to be sent, the
pictures of a sent message, and those of a message being edited.

Each picture is a tile: its thumbnail (from :class:`~app.ui.thumbnails.Thumbnails`, made off the
GUI thread; "…" until it is ready) as a flat button that opens it larger
(:class:`~app.ui.picture_viewer.PictureViewer`), its format, size and bytes as the tooltip, and —
where pictures can be taken away — a small × in its corner. The tiles wrap onto more rows when
the row is short of room, so a narrow window never cuts one off.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import QIcon, QPixmap, QResizeEvent
from PySide6.QtWidgets import QLayout, QLayoutItem, QSizePolicy, QToolButton, QWidget

from app.engine.runtime.chat_format.images import ImagePart
from app.ui.icons import icon
from app.ui.picture_viewer import PictureViewer, picture_facts
from app.ui.thumbnails import Thumbnails

TILE_SPACING = 6
REMOVE_SIDE = 20
REMOVE_STYLE = (
    "QToolButton { background: palette(base); border: 1px solid palette(mid);"
    f" border-radius: {REMOVE_SIDE // 2}px; padding: 2px; }}"
)
"""The × sits on the picture: a disc of the base colour keeps it visible on any picture."""


class FlowLayout(QLayout):
    """Items left to right, wrapping onto the next row when the width runs out."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self.setContentsMargins(0, 0, 0, 0)

    def addItem(self, item: QLayoutItem) -> None:
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self._place(QRect(0, 0, width, 0), move=False)

    def setGeometry(self, rect: QRect) -> None:
        super().setGeometry(rect)
        self._place(rect, move=True)

    def sizeHint(self) -> QSize:
        """One row of every tile (the widest this layout wants)."""
        widths = [item.sizeHint().width() for item in self._items]
        height = max((item.sizeHint().height() for item in self._items), default=0)
        return QSize(sum(widths) + TILE_SPACING * max(0, len(widths) - 1), height)

    def minimumSize(self) -> QSize:
        """The widest tile: narrower, a tile would be cut."""
        size = QSize(0, 0)
        for item in self._items:
            size = size.expandedTo(item.minimumSize())
        return size

    def _place(self, rect: QRect, *, move: bool) -> int:
        x, y, row_height = rect.x(), rect.y(), 0
        for item in self._items:
            hint = item.sizeHint()
            if x > rect.x() and x + hint.width() > rect.right() + 1:
                x, y, row_height = rect.x(), y + row_height + TILE_SPACING, 0
            if move:
                item.setGeometry(QRect(QPoint(x, y), hint))
            x += hint.width() + TILE_SPACING
            row_height = max(row_height, hint.height())
        return y + row_height - rect.y()


class PictureTile(QWidget):
    """One picture: its thumbnail as a button (click: see it larger) and, if ``removable``, a ×
    that asks to take it away (``remove_requested``)."""

    remove_requested = Signal()

    def __init__(
        self, picture: ImagePart, thumbnails: Thumbnails, side: int, *, removable: bool
    ) -> None:
        super().__init__()
        self.picture = picture
        self._thumbnails = thumbnails
        self._side = side
        self.viewer: PictureViewer | None = None
        self.button = QToolButton(self)
        self.button.setObjectName("pictureTile")
        self.button.setAutoRaise(True)
        self.button.setToolTip(f"{picture_facts(picture)} — click to see it larger")
        self.button.setAccessibleName("Picture")
        self.button.clicked.connect(self.open_viewer)
        self.remove_button: QToolButton | None = None
        if removable:
            self.remove_button = QToolButton(self)
            self.remove_button.setObjectName("removePicture")
            self.remove_button.setIcon(icon("close"))
            self.remove_button.setToolTip("Take this picture away")
            self.remove_button.setAccessibleName("Remove picture")
            self.remove_button.setFixedSize(REMOVE_SIDE, REMOVE_SIDE)
            self.remove_button.setStyleSheet(REMOVE_STYLE)
            self.remove_button.clicked.connect(self.remove_requested.emit)
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        thumbnails.ready.connect(self._on_ready)
        self._draw()

    @property
    def loaded(self) -> bool:
        """Whether the thumbnail is drawn (not "…")."""
        return not self.button.icon().isNull()

    def _on_ready(self, key: str) -> None:
        if key == self.picture.sha256:
            self._draw()

    def _draw(self) -> None:
        image = self._thumbnails.get(self.picture)
        if image is None:
            failed = self._thumbnails.failed(self.picture)
            self.button.setText("?" if failed else "…")
            self.button.setFixedSize(self._side, self._side)
        else:
            scale = self.devicePixelRatioF()
            pixmap = QPixmap.fromImage(image).scaled(
                QSize(self._side, self._side) * scale,
                Qt.AspectRatioMode.KeepAspectRatio,
                Qt.TransformationMode.SmoothTransformation,
            )
            pixmap.setDevicePixelRatio(scale)
            shown = pixmap.deviceIndependentSize().toSize()
            self.button.setText("")
            self.button.setIcon(QIcon(pixmap))
            self.button.setIconSize(shown)
            self.button.setFixedSize(shown + QSize(6, 6))
        self.setFixedSize(self.button.size())
        self.updateGeometry()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self.remove_button is not None:
            self.remove_button.move(self.width() - REMOVE_SIDE, 0)
            self.remove_button.raise_()

    def open_viewer(self) -> PictureViewer:
        """Show the picture larger, in a window of its own."""
        self.viewer = PictureViewer(self.picture, self.window())
        self.viewer.show()
        return self.viewer


class PictureTiles(QWidget):
    """A wrapping row of :class:`PictureTile`; hidden while it has none. ``changed`` after a
    picture was removed with its ×."""

    changed = Signal()

    def __init__(
        self,
        thumbnails: Thumbnails,
        side: int,
        *,
        removable: bool = False,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._thumbnails = thumbnails
        self._side = side
        self._removable = removable
        self.tiles: list[PictureTile] = []
        self._layout = FlowLayout(self)
        policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)
        self.hide()

    def pictures(self) -> tuple[ImagePart, ...]:
        return tuple(tile.picture for tile in self.tiles)

    def set_pictures(self, pictures: Sequence[ImagePart]) -> None:
        for tile in self.tiles:
            self._layout.removeWidget(tile)
            tile.deleteLater()
        self.tiles = []
        for picture in pictures:
            self.add(picture)
        self.setVisible(bool(self.tiles))

    def add(self, picture: ImagePart) -> PictureTile:
        tile = PictureTile(picture, self._thumbnails, self._side, removable=self._removable)
        tile.remove_requested.connect(lambda tile=tile: self.remove(self.tiles.index(tile)))
        self._layout.addWidget(tile)
        self.tiles.append(tile)
        self.show()
        return tile

    def remove(self, index: int) -> None:
        tile = self.tiles.pop(index)
        self._layout.removeWidget(tile)
        tile.hide()
        tile.deleteLater()
        self.setVisible(bool(self.tiles))
        self.changed.emit()

    def clear(self) -> None:
        self.set_pictures(())
