"""A picture of the chat seen larger: a click on its thumbnail opens it in a window of its own.

The picture is shown as the model sees it (upright, transparency on white), at most
:data:`VIEW_SIDE` px on a side and never larger than most of the screen. Decoding and scaling a
photo of many megapixels takes a while, so it is done in a background thread; the window opens
at once and says "Loading…" until the picture is ready. Escape or Close shuts it.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QGuiApplication, QImage, QPixmap
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app.engine.runtime.chat_format.images import ImagePart
from app.engine.units import format_bytes
from app.ui.background import run_in_background
from app.ui.thumbnails import thumbnail_image

VIEW_SIDE = 2048
"""The longest side the viewer decodes a picture to (a 48 MP photo is shown, not held whole)."""
SCREEN_SHARE = 0.85
"""The viewer takes at most this share of the screen's free area."""
FRAME = QSize(40, 90)
"""Room around the picture: margins, the Close button."""


def picture_facts(picture: ImagePart) -> str:
    """ "PNG · 640×480 px · 120 KB" """
    kind = picture.media_type.removeprefix("image/").upper()
    return f"{kind} · {picture.width}×{picture.height} px · {format_bytes(len(picture.data))}"


class PictureViewer(QDialog):
    """One picture, fitted to the screen; ``image_label`` holds it once it is decoded."""

    def __init__(self, picture: ImagePart, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("pictureViewer")
        self.setWindowTitle(f"Picture — {picture_facts(picture)}")
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.picture = picture
        self.image_label = QLabel("Loading…")
        self.image_label.setObjectName("pictureView")
        self.image_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.error = QLabel()
        self.error.setWordWrap(True)
        self.error.hide()
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setAlignment(Qt.AlignmentFlag.AlignCenter)
        scroll.setWidget(self.image_label)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(scroll, 1)
        layout.addWidget(self.error)
        layout.addWidget(buttons)
        shown = self._fitted(QSize(picture.width, picture.height))
        self.resize(shown + FRAME)
        self._scale = self.devicePixelRatioF()
        side = min(VIEW_SIDE, round(max(shown.width(), shown.height()) * self._scale))
        run_in_background(lambda: thumbnail_image(picture, side), self._show, self._fail)

    def _fitted(self, size: QSize) -> QSize:
        """``size``, shrunk (keeping its shape) to what the screen has room for."""
        screen = self.screen() or QGuiApplication.primaryScreen()
        room = screen.availableGeometry().size() * SCREEN_SHARE - FRAME
        if size.width() <= room.width() and size.height() <= room.height():
            return size
        return size.scaled(room, Qt.AspectRatioMode.KeepAspectRatio)

    @property
    def loaded(self) -> bool:
        return not self.image_label.pixmap().isNull()

    def _show(self, image: QImage) -> None:
        pixmap = QPixmap.fromImage(image)
        pixmap.setDevicePixelRatio(self._scale)
        self.image_label.setPixmap(pixmap)

    def _fail(self, exc: BaseException) -> None:
        self.image_label.setText("")
        self.error.setText(f"The picture cannot be shown: {exc}")
        self.error.show()
