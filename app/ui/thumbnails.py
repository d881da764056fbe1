"""Small upright copies of pictures, made off the GUI thread and kept by content.

A picture in the chat (attached, sent, or reopened with its conversation) is shown as a
thumbnail. Decoding a photo and scaling it takes tens of milliseconds, a large one far more, so
it never runs on the GUI thread: :class:`Thumbnails` makes each one in a background thread with
the engine's :func:`~app.engine.chat.attachments.thumbnail_png` (the picture as the model sees
it: upright by its EXIF orientation, transparency on white) and keeps the last
:data:`THUMBNAILS_KEPT` by the picture's SHA-256, so a conversation shown again (after an edit, a
new version, a switch back) draws at once. Whoever shows one asks :meth:`Thumbnails.get` and,
when it is not made yet, redraws on :attr:`Thumbnails.ready`.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QImage

from app.engine.chat.attachments import THUMBNAIL_SIDE, thumbnail_png
from app.engine.runtime.chat_format.images import ImagePart
from app.ui.background import run_in_background

log = logging.getLogger(__name__)

THUMBNAILS_KEPT = 200
"""Thumbnails kept in memory (at most 256 px on a side: about 200 KB each, 40 MB in all)."""


def thumbnail_image(picture: ImagePart, side: int = THUMBNAIL_SIDE) -> QImage:
    """``picture`` at most ``side`` px on a side, upright (for a worker thread: QImage is safe
    off the GUI thread, QPixmap is not)."""
    image = QImage.fromData(thumbnail_png(picture, side), "PNG")
    if image.isNull():
        raise ValueError(f"Qt could not read the thumbnail of {picture!r}")
    return image


class Thumbnails(QObject):
    """Thumbnails by picture content; ``ready(sha256)`` once one asked for is made (or failed:
    then :meth:`failed` says so and it is not tried again)."""

    ready = Signal(str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._made: OrderedDict[str, QImage] = OrderedDict()
        self._making: set[str] = set()
        self._failed: set[str] = set()

    def get(self, picture: ImagePart) -> QImage | None:
        """The thumbnail of ``picture``, or None while it is being made (``ready`` follows)."""
        made = self._made.get(picture.sha256)
        if made is not None:
            self._made.move_to_end(picture.sha256)
            return made
        if picture.sha256 not in self._making and picture.sha256 not in self._failed:
            self._making.add(picture.sha256)
            run_in_background(
                lambda: thumbnail_image(picture),
                lambda image, key=picture.sha256: self._keep(key, image),
                lambda exc, key=picture.sha256: self._give_up(key, exc),
            )
        return None

    def failed(self, picture: ImagePart) -> bool:
        return picture.sha256 in self._failed

    def put(self, picture: ImagePart, image: QImage) -> None:
        """Keep a thumbnail made elsewhere (an attachment's, made while it was read)."""
        self._keep(picture.sha256, image)

    def _keep(self, key: str, image: QImage) -> None:
        self._making.discard(key)
        self._made[key] = image
        self._made.move_to_end(key)
        while len(self._made) > THUMBNAILS_KEPT:
            self._made.popitem(last=False)
        self.ready.emit(key)

    def _give_up(self, key: str, exc: BaseException) -> None:
        log.warning("no thumbnail for picture %s: %s", key[:12], exc)
        self._making.discard(key)
        self._failed.add(key)
        self.ready.emit(key)
