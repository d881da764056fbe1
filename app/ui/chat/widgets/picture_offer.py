"""What a drop or a paste offers the chat as pictures: files, encoded bytes, or an image.

Pictures reach the chat three ways besides the Attach button: files dropped on the window (a
file manager's drag carries their URLs), a picture pasted with Ctrl+V (an app that copies an
image offers it encoded, as ``image/png`` or another type, or as Qt's own image), and a picture
dropped from another app (the same, by drag). :func:`picture_offer` reads the drag's or the
clipboard's data for any of these, on the GUI thread and without decoding anything; the chat
reads and checks the pictures in a background thread. Plain text that is more than a link stays
text: pasting a paragraph into the message box types it, even when the app that copied it also
offered a picture of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QMimeData
from PySide6.QtGui import QImage

ENCODED_TYPES = ("image/png", "image/jpeg", "image/webp")
"""Clipboard types taken as the file's own bytes (checked like a file)."""
LINK_PREFIXES = ("http://", "https://", "file://")


@dataclass(frozen=True)
class PictureOffer:
    """Local files, or the bytes of one encoded picture, or one image Qt holds."""

    paths: tuple[Path, ...] = ()
    encoded: bytes | None = None
    image: QImage | None = None


def picture_offer(mime: QMimeData) -> PictureOffer | None:
    """The pictures in ``mime`` (a drag's or the clipboard's data), None when it offers none."""
    paths = tuple(Path(url.toLocalFile()) for url in mime.urls() if url.isLocalFile())
    if paths:
        return PictureOffer(paths=paths)
    if _is_prose(mime):
        return None
    for media_type in ENCODED_TYPES:
        if mime.hasFormat(media_type):
            data = bytes(mime.data(media_type).data())
            if data:
                return PictureOffer(encoded=data)
    if mime.hasImage():
        image = mime.imageData()
        if isinstance(image, QImage) and not image.isNull():
            return PictureOffer(image=QImage(image))
    return None


def _is_prose(mime: QMimeData) -> bool:
    """Text that is more than one link: what a user pasting it means to type."""
    if not mime.hasText():
        return False
    text = mime.text().strip()
    return bool(text) and not (text.startswith(LINK_PREFIXES) and len(text.split()) == 1)
