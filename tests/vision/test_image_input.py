"""Images as they enter the runtime: the files a user may send are taken, hostile or broken ones
are refused with a message naming where they came from, and the pixels a model sees are upright
RGB on white with a hash of exactly those pixels."""

from __future__ import annotations

import io
import zlib

import pytest
from PIL import Image

from app.engine.errors import ImageError
from app.engine.runtime.chat_format.images import ImageLimits, read_image, rgb_pixels
from tests.vision.conftest import picture, png_declaring

LIMITS = ImageLimits()


@pytest.mark.parametrize(
    ("image_format", "media_type", "save"),
    [
        ("PNG", "image/png", {}),
        ("JPEG", "image/jpeg", {"quality": 90}),
        ("WEBP", "image/webp", {"lossless": True}),
        ("WEBP", "image/webp", {"quality": 80}),
    ],
)
def test_png_jpeg_and_webp_are_taken_as_sent(image_format: str, media_type: str, save) -> None:
    data = picture(120, 80, image_format=image_format, **save)
    part = read_image(data, LIMITS, "messages[0].content[1]")
    assert (part.media_type, part.width, part.height, part.data) == (media_type, 120, 80, data)
    assert len(part.sha256) == 64
    assert "bytes" in repr(part) and len(repr(part)) < 120  # never the bytes themselves
    seen = rgb_pixels(part)
    assert (seen.width, seen.height, len(seen.pixels)) == (120, 80, 120 * 80 * 3)


def test_a_gif_or_a_text_file_is_refused_naming_the_field() -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buffer, format="GIF")
    with pytest.raises(ImageError, match=r"^field: the image is GIF, not PNG, JPEG or WebP"):
        read_image(buffer.getvalue(), LIMITS, "field")
    with pytest.raises(ImageError, match=r"^field: not a readable image .*send a PNG, JPEG"):
        read_image(b"hello, I am not a picture", LIMITS, "field")


def test_a_file_cut_short_is_refused_before_it_reaches_a_model() -> None:
    whole = picture(200, 150, image_format="JPEG")
    with pytest.raises(ImageError, match=r"damaged or cut short .*send the complete file"):
        read_image(whole[: len(whole) // 2], LIMITS, "upload")
    png = picture(200, 150)
    with pytest.raises(ImageError, match=r"damaged or cut short"):
        read_image(png[: len(png) - 40], LIMITS, "upload")


@pytest.mark.parametrize(
    ("width", "height"),
    [(20_000, 20_000), (100_000, 100_000), (20_000, 10)],
)
def test_a_decompression_bomb_is_refused_from_its_header(width: int, height: int) -> None:
    """A few dozen bytes declaring 400 megapixels, 10 gigapixels, or a 20,000 px side: refused
    before a single row is decoded (the test would run out of memory otherwise)."""
    bomb = png_declaring(width, height)
    assert len(bomb) < 100
    with pytest.raises(ImageError) as caught:
        read_image(bomb, LIMITS, "messages[0].content[0]")
    message = str(caught.value)
    assert message.startswith("messages[0].content[0]: ")
    assert "pixels" in message and not caught.value.too_large


def test_a_real_compressed_bomb_is_refused_without_decoding_it() -> None:
    """8000 × 8000 black pixels compress to about 60 kB; decoded they would be 64 MB."""
    rows = zlib.compress(b"\x00" * (8001 * 8000), 9)
    bomb = png_declaring(8000, 8000, rows)
    assert len(bomb) < 100_000
    with pytest.raises(ImageError, match=r"8000×8000 pixels; images may have at most 50 megapix"):
        read_image(bomb, LIMITS, "image")


def test_the_byte_limit_is_checked_first_and_marked_too_large() -> None:
    small = ImageLimits(max_bytes=2**20)
    with pytest.raises(
        ImageError, match=r"^image: the image is 2\.0 MiB; images may be at most 1"
    ) as caught:
        read_image(b"\x00" * 2**21, small, "image")
    assert caught.value.too_large


def test_an_animated_image_is_refused() -> None:
    frames = [Image.new("RGB", (16, 16), colour) for colour in ("red", "blue")]
    buffer = io.BytesIO()
    frames[0].save(buffer, format="PNG", save_all=True, append_images=frames[1:])
    with pytest.raises(ImageError, match=r"animated \(2 frames\): send a still image"):
        read_image(buffer.getvalue(), LIMITS, "image")


def test_a_phone_photo_is_turned_upright_by_its_exif_orientation() -> None:
    landscape = Image.new("RGB", (60, 20), "white")
    exif = landscape.getexif()
    exif[0x0112] = 6  # "rotate 90° clockwise to view"
    buffer = io.BytesIO()
    landscape.save(buffer, format="JPEG", exif=exif.tobytes())
    part = read_image(buffer.getvalue(), LIMITS, "photo")
    seen = rgb_pixels(part)
    assert (part.width, part.height) == (60, 20)  # as stored
    assert (seen.width, seen.height) == (20, 60)  # as meant to be seen


def test_transparent_areas_are_laid_on_white() -> None:
    image = Image.new("RGBA", (4, 4), (255, 0, 0, 255))
    image.putpixel((0, 0), (0, 0, 0, 0))  # fully transparent black
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    seen = rgb_pixels(read_image(buffer.getvalue(), LIMITS, "image"))
    assert seen.pixels[:3] == b"\xff\xff\xff" and seen.pixels[3:6] == b"\xff\x00\x00"
