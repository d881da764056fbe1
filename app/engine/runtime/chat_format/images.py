"""Images given to a chat: checked once where they enter, then decoded to the pixels a model sees.

Images reach the runtime as encoded files — PNG, JPEG or WebP — from the server's requests
(OpenAI ``image_url`` data URLs, Anthropic ``image`` blocks) and from the chat page. Any of them
may be hostile or broken: a small file that declares a gigantic canvas (a decompression bomb), a
file cut short, a format nobody asked for, a 100 MB upload. So every image is read here, once,
with Pillow, before it is queued: its format, byte size, declared width × height and longest
side are checked against :class:`ImageLimits` *before* any pixel is decoded, then the whole file
is decoded (a truncated file fails here, with its name, not in the worker). What passes becomes
an :class:`ImagePart`: the file's bytes, unchanged (the history store keeps and deduplicates
them by ``sha256``), and what was learned about it.

The pixels a model sees come from :func:`rgb_pixels`: Pillow again (llama.cpp's own loader,
stb_image, has no WebP), turned upright by the file's EXIF orientation (as a phone's photo is
meant to be seen), transparent areas laid on white, 8-bit RGB. :class:`RgbImage` carries a hash
of exactly those pixels, the key under which prefix reuse recognises an image it has already
evaluated, however the file was encoded.
"""

from __future__ import annotations

import hashlib
import io
import warnings
from dataclasses import dataclass

from PIL import Image, ImageOps

from app.engine.errors import ImageError

FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp"}
"""Pillow's format name → the media type clients send."""
MEDIA_TYPES = {media_type: name for name, media_type in FORMATS.items()}
MIB = 2**20


@dataclass(frozen=True)
class ImageLimits:
    """What one image may be: its file size, its pixel count (width × height) and longest side.

    The defaults admit any photo a phone takes (48 MP at most, 8192 px on a side) and refuse
    what only an attack or a mistake sends; a projector scales every image down to its own
    budget of tokens anyway (a few megapixels at most)."""

    max_bytes: int = 20 * MIB
    max_pixels: int = 50_000_000
    max_side: int = 16_384

    def describe(self) -> str:
        return (
            f"{self.max_bytes // MIB} MiB, {self.max_pixels / 1e6:g} megapixels and "
            f"{self.max_side} px on a side"
        )


@dataclass(frozen=True)
class ImagePart:
    """One checked image file: its bytes as sent, their SHA-256, its format and size."""

    data: bytes
    media_type: str
    width: int
    height: int
    sha256: str

    def __repr__(self) -> str:  # never dump megabytes into a log
        return (
            f"ImagePart({self.media_type}, {self.width}×{self.height}, {len(self.data)} bytes, "
            f"sha256 {self.sha256[:12]}…)"
        )


@dataclass(frozen=True)
class RgbImage:
    """Decoded pixels, row-major 8-bit RGB; ``content_hash`` identifies the picture itself."""

    width: int
    height: int
    pixels: bytes
    content_hash: str

    def __repr__(self) -> str:
        return f"RgbImage({self.width}×{self.height}, {self.content_hash[:12]}…)"


def read_image(data: bytes, limits: ImageLimits, where: str) -> ImagePart:
    """``data`` checked against ``limits`` and fully decoded once; :class:`ImageError` names
    ``where`` (the field or file it came from) and what to change."""
    if len(data) > limits.max_bytes:
        raise ImageError(
            f"{where}: the image is {len(data) / MIB:.1f} MiB; images may be at most "
            f"{limits.max_bytes // MIB} MiB: send a smaller or more compressed image",
            too_large=True,
        )
    with _opened(data, where) as image:
        name = image.format or "unknown"
        if name not in FORMATS:
            raise ImageError(
                f"{where}: the image is {name}, not PNG, JPEG or WebP: convert it to one of those"
            )
        _check_canvas(image.size, limits, where)
        if getattr(image, "n_frames", 1) > 1:
            raise ImageError(
                f"{where}: the image is animated ({image.n_frames} frames): send a still image"
            )
        _decode_all(image, where)
        return ImagePart(
            data=data,
            media_type=FORMATS[name],
            width=image.width,
            height=image.height,
            sha256=hashlib.sha256(data).hexdigest(),
        )


def rgb_pixels(part: ImagePart) -> RgbImage:
    """The pixels of a checked image as a model is given them (upright, on white, 8-bit RGB)."""
    with _opened(part.data, f"image {part.sha256[:12]}") as image:
        upright = ImageOps.exif_transpose(image)
        if upright.mode in ("RGBA", "LA", "PA") or "transparency" in upright.info:
            rgba = upright.convert("RGBA")
            rgb = Image.new("RGB", rgba.size, (255, 255, 255))
            rgb.paste(rgba, mask=rgba.getchannel("A"))
        else:
            rgb = upright.convert("RGB")
        pixels = rgb.tobytes()
    digest = hashlib.sha256(f"{rgb.width}x{rgb.height}:".encode())
    digest.update(pixels)
    return RgbImage(rgb.width, rgb.height, pixels, digest.hexdigest())


def _opened(data: bytes, where: str) -> Image.Image:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            return Image.open(io.BytesIO(data))
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ImageError(f"{where}: the image declares too many pixels ({exc})") from exc
    except (OSError, ValueError, SyntaxError) as exc:
        raise ImageError(
            f"{where}: not a readable image ({exc}); send a PNG, JPEG or WebP file"
        ) from exc


def _check_canvas(size: tuple[int, int], limits: ImageLimits, where: str) -> None:
    width, height = size
    if width < 1 or height < 1:
        raise ImageError(f"{where}: the image has no pixels ({width}×{height})")
    if width * height > limits.max_pixels or max(width, height) > limits.max_side:
        raise ImageError(
            f"{where}: the image is {width}×{height} pixels; images may have at most "
            f"{limits.max_pixels / 1e6:g} megapixels and {limits.max_side} px on a side: "
            "scale it down"
        )


def _decode_all(image: Image.Image, where: str) -> None:
    """Decode every pixel now: a truncated or corrupt file fails here, not later."""
    try:
        image.load()
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise ImageError(
            f"{where}: the image is damaged or cut short ({exc}); send the complete file"
        ) from exc
