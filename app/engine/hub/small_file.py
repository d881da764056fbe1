"""A small file from a Hub repo (a config.json), read with a size cap that holds even when the
Hub lies about the size.

Why: ``hf_hub_download`` fetches whatever the server sends; a hostile or broken Hub's 300 MB
``config.json`` was downloaded, then parsed whole (639 MB of memory) just to learn a model's
width. Here the listed size is checked first when known, and the body is read in pieces and
dropped past :data:`MAX_SMALL_FILE_BYTES` whatever the listing or ``Content-Length`` said.
"""

from __future__ import annotations

import httpx2
from huggingface_hub import hf_hub_url
from huggingface_hub.utils import build_hf_headers, get_session

from app import TOOL_NAME, __version__
from app.engine.hub.source import TIMEOUT

MAX_SMALL_FILE_BYTES = 4 * 2**20
"""Real config.json files are a few kilobytes; the largest seen (long label maps) under 1 MB."""


def fetch_small_file(
    repo_id: str,
    path: str,
    *,
    endpoint: str,
    token: str | None,
    listed_size: int | None = None,
    limit_bytes: int = MAX_SMALL_FILE_BYTES,
) -> bytes | None:
    """The file's bytes, or None when it is missing, unreadable or larger than ``limit_bytes``
    (by its listing or by what arrives)."""
    if listed_size is not None and listed_size > limit_bytes:
        return None
    url = hf_hub_url(repo_id, path, endpoint=endpoint)
    headers = build_hf_headers(token=token, library_name=TOOL_NAME, library_version=__version__)
    headers["Accept-Encoding"] = "identity"
    received = bytearray()
    try:
        with get_session().stream(
            "GET", url, headers=headers, timeout=TIMEOUT, follow_redirects=True
        ) as response:
            if response.status_code != 200:
                return None
            for chunk in response.iter_bytes():
                received += chunk
                if len(received) > limit_bytes:
                    return None
    except httpx2.HTTPError:
        return None
    return bytes(received)
