"""Images in requests: OpenAI ``image_url`` parts and Anthropic ``image`` sources, read and checked.

Both APIs carry an image as base64 text (a ``data:`` URL, or Anthropic's ``{"type": "base64",
"media_type", "data"}``); OpenAI clients may also send an ``http(s)`` URL, which this server
fetches only when started with ``--allow-remote-images`` (a server that fetches any URL a client
names can be made to read the local network). Every image is checked by
:func:`app.engine.runtime.chat_format.images.read_image` — format, bytes, pixels, a complete file —
and a request may hold at most :attr:`ImageRules.max_images`. A file over the byte limit is a 413,
every other refusal a 400; each names the field (``messages[0].content[1]``) and what to change.
The base64 text is measured before it is decoded, so a 100 MB data URL costs no 75 MB buffer.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.engine.errors import ImageError
from app.engine.runtime.chat_format.images import MEDIA_TYPES, ImageLimits, ImagePart, read_image
from app.engine.server.core.api_errors import ApiError, bad_request
from app.engine.server.core.echo import echo

REMOTE_SCHEMES = ("http://", "https://")
DEFAULT_MAX_IMAGES = 8


@dataclass(frozen=True)
class ImageRules:
    """The images a request may carry: each within ``limits``, at most ``max_images`` of them,
    remote URLs only with ``allow_remote``."""

    limits: ImageLimits = field(default_factory=ImageLimits)
    max_images: int = DEFAULT_MAX_IMAGES
    allow_remote: bool = False


class RequestImages:
    """Reads the images of one request in order, counting them against the rules.
    ``fetched``: the bytes of the remote URLs the request names, fetched beforehand."""

    def __init__(self, rules: ImageRules, fetched: Mapping[str, bytes] | None = None) -> None:
        self.rules = rules
        self._fetched = fetched or {}
        self._count = 0

    def from_url(self, url: Any, where: str) -> ImagePart:
        """An OpenAI ``image_url.url``: a base64 ``data:`` URL, or a fetched http(s) URL."""
        if not isinstance(url, str):
            raise bad_request(f"'{where}' must be a data: URL or an http(s) URL", where)
        if url.startswith("data:"):
            media_type, payload = _data_url(url, where)
            return self.from_base64(payload, media_type, where)
        if url.startswith(REMOTE_SCHEMES):
            if not self.rules.allow_remote:
                raise bad_request(
                    f"'{where}' is a remote URL, which this server does not fetch: send the image "
                    "inline as a data: URL (data:image/png;base64,...), or start the server with "
                    "--allow-remote-images",
                    where,
                )
            if url not in self._fetched:
                raise bad_request(
                    f"'{where}': the image URL was not fetched; send it inline", where
                )
            return self._read(self._fetched[url], where)
        raise bad_request(
            f"'{where}' is {echo(url)}: send a data: URL (data:image/png;base64,...)", where
        )

    def from_base64(self, payload: Any, media_type: Any, where: str) -> ImagePart:
        """Base64 text of a PNG, JPEG or WebP file (``media_type`` as the client declared it)."""
        if media_type not in MEDIA_TYPES:
            raise bad_request(
                f"'{where}' is of type {echo(media_type)}: this server reads image/png, "
                "image/jpeg and image/webp",
                where,
            )
        if not isinstance(payload, str) or not payload:
            raise bad_request(f"'{where}' must hold the image as base64 text", where)
        limit = self.rules.limits.max_bytes
        if len(payload) // 4 * 3 > limit + 3:
            raise _too_large(len(payload) // 4 * 3, limit, where)
        try:
            data = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise bad_request(f"'{where}' is not valid base64", where) from None
        return self._read(data, where)

    def _read(self, data: bytes, where: str) -> ImagePart:
        self._count += 1
        if self._count > self.rules.max_images:
            raise bad_request(
                f"'{where}': a request may hold at most {self.rules.max_images} images; send "
                "fewer or start the server with a larger --max-images",
                where,
            )
        try:
            return read_image(data, self.rules.limits, where)
        except ImageError as error:
            if error.too_large:
                raise ApiError(413, str(error), param=where, code="image_too_large") from None
            raise bad_request(str(error), where) from None


def remote_urls(body: Any) -> tuple[str, ...]:
    """The http(s) image URLs a chat body names — OpenAI ``image_url`` parts, Anthropic ``image``
    blocks with a ``url`` source, in turns and in tool results — in order, each once."""
    found: dict[str, None] = {}
    pending = [body.get("messages") if isinstance(body, dict) else None]
    while pending:
        item = pending.pop()
        if isinstance(item, list):
            pending.extend(reversed(item))
        elif isinstance(item, dict):
            url = _image_url(item)
            if isinstance(url, str) and url.startswith(REMOTE_SCHEMES):
                found[url] = None
            pending.extend(reversed(list(item.values())))
    return tuple(found)


def image_url_of(part: dict[str, Any]) -> Any:
    """The URL of an ``image_url`` part (``{"url": ...}``, or the bare string some clients send)."""
    return _image_url(part)


def _image_url(part: Any) -> Any:
    if not isinstance(part, dict):
        return None
    if part.get("type") == "image_url":
        value = part.get("image_url")
        return value.get("url") if isinstance(value, dict) else value
    source = part.get("source") if part.get("type") == "image" else None
    return source.get("url") if isinstance(source, dict) and source.get("type") == "url" else None


def _data_url(url: str, where: str) -> tuple[str, str]:
    header, comma, payload = url.partition(",")
    media_type, *options = header.removeprefix("data:").split(";")
    if not comma or "base64" not in options:
        raise bad_request(
            f"'{where}' must be a base64 data: URL (data:image/png;base64,...)", where
        )
    return media_type.strip().lower(), payload


def _too_large(size: int, limit: int, where: str) -> ApiError:
    return ApiError(
        413,
        f"{where}: the image is about {size / 2**20:.1f} MiB; images may be at most "
        f"{limit // 2**20} MiB: send a smaller or more compressed image",
        param=where,
        code="image_too_large",
    )
