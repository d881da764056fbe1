"""Pictures a user attaches to a chat message: read and checked once, placed in the message,
shown small.

The chat page takes pictures from a file dialog, a drop or the clipboard; every one goes through
:func:`~app.engine.runtime.chat_format.images.read_image` (PNG, JPEG or WebP within the limits,
fully decoded so a damaged file is refused at once, with its name) before it is shown or sent.
A message's pictures stand before its text (:func:`placed_first`), as a user who attaches pictures
and types a question means it; :class:`~app.engine.chat.history.HistoryStore` keeps them with
the message (by content, deduplicated) and the export writes them out. :func:`thumbnail_png`
makes the small upright picture a message shows, without Qt (the page only draws the bytes).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

from PIL import Image, ImageOps

from app.engine.errors import ImageError
from app.engine.runtime.chat_format.images import (
    MIB,
    ImageLimits,
    ImagePart,
    read_image,
    rgb_pixels,
)
from app.engine.runtime.chat_format.prompting import PlacedImage

THUMBNAIL_SIDE = 256
"""The longest side of a message's thumbnail, in pixels."""


def read_attachment(path: Path, limits: ImageLimits | None = None) -> ImagePart:
    """A picture file, checked; :class:`ImageError` names the file and what to change."""
    path = Path(path).expanduser()
    limits = limits or ImageLimits()
    try:
        size = path.stat().st_size
        if size > limits.max_bytes:  # refused before it is read into memory
            raise ImageError(
                f"{path.name}: the picture is {size / MIB:.1f} MiB; pictures may be at most "
                f"{limits.max_bytes // MIB} MiB: choose a smaller or more compressed one",
                too_large=True,
            )
        data = path.read_bytes()
    except OSError as exc:
        raise ImageError(f"cannot read the picture {path}: {exc.strerror or exc}") from None
    return read_image(data, limits, path.name)


def pasted_attachment(data: bytes, limits: ImageLimits | None = None) -> ImagePart:
    """A picture pasted from the clipboard (the encoded bytes the clipboard offers)."""
    return read_image(data, limits or ImageLimits(), "the pasted picture")


def placed_first(pictures: Sequence[ImagePart]) -> tuple[PlacedImage, ...]:
    """``pictures`` placed in a user message: before its text, in order."""
    return tuple(PlacedImage(0, picture) for picture in pictures)


def thumbnail_png(picture: ImagePart, side: int = THUMBNAIL_SIDE) -> bytes:
    """The picture as the model sees it (upright, on white), at most ``side`` px on a side,
    as PNG bytes."""
    pixels = rgb_pixels(picture)
    image = Image.frombytes("RGB", (pixels.width, pixels.height), pixels.pixels)
    image = ImageOps.contain(image, (side, side))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()
