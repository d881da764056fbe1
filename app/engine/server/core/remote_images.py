"""Fetching the http(s) image URLs of a request, for a server started with --allow-remote-images.

Off by default: a server that fetches whatever URL a client names can be made to read addresses
only it can reach (the local network, a cloud's metadata service). When it is on, every URL is
fetched before the request is parsed, concurrently, each within :data:`FETCH_SECONDS`, reading at
most the image byte limit (a larger body is a 413 without reading the rest), following at most
:data:`MAX_REDIRECTS` redirects and only to http(s). A URL that fails is a 400 naming it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import httpx2

from app.engine.server.core.api_errors import ApiError, bad_request
from app.engine.server.core.echo import echo

FETCH_SECONDS = 15.0
MAX_REDIRECTS = 3


async def fetch_images(urls: Sequence[str], max_bytes: int) -> dict[str, bytes]:
    """The bytes behind each of ``urls`` (each at most ``max_bytes``)."""
    if not urls:
        return {}
    timeout = httpx2.Timeout(FETCH_SECONDS)
    async with httpx2.AsyncClient(
        timeout=timeout, follow_redirects=True, max_redirects=MAX_REDIRECTS
    ) as client:
        bodies = await asyncio.gather(*(_fetch(client, url, max_bytes) for url in urls))
    return dict(zip(urls, bodies, strict=True))


async def _fetch(client: httpx2.AsyncClient, url: str, max_bytes: int) -> bytes:
    try:
        async with asyncio.timeout(FETCH_SECONDS):
            async with client.stream("GET", url) as response:
                if response.url.scheme not in ("http", "https"):
                    raise bad_request(f"the image URL {echo(url)} redirects away from http(s)")
                if response.status_code != 200:
                    raise bad_request(
                        f"the image URL {echo(url)} answered HTTP {response.status_code}; send "
                        "a URL that serves the image, or the image inline as a data: URL"
                    )
                body = bytearray()
                async for piece in response.aiter_bytes():
                    body += piece
                    if len(body) > max_bytes:
                        raise ApiError(
                            413,
                            f"the image at {echo(url)} is larger than {max_bytes // 2**20} MiB; "
                            "send a smaller image",
                            code="image_too_large",
                        )
                return bytes(body)
    except (httpx2.HTTPError, TimeoutError) as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else type(exc).__name__
        raise bad_request(
            f"the image URL {echo(url)} could not be fetched ({reason}); send the image inline "
            "as a data: URL"
        ) from None
