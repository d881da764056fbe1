"""Whether a GGUF on the Hub carries an MTP head, read from its first kilobytes.

Why: a file name says ``-mtp`` only by convention; llama.cpp's converter keeps the MTP block by
default, so many plain-named GGUFs of MTP models have the head inside. The converter writes the
model's scalar keys (``{arch}.nextn_predict_layers`` among them) before the tokenizer's long
arrays, so one ranged read of :data:`PEEK_BYTES` at the start of the file answers it, without
downloading the model. A failed or inconclusive read answers None (the name decides then). The
same read says a file's ``general.architecture``, which is how search tells a separate drafter
model (Gemma 4's ``gemma4-assistant``) from a head file or a trunk.
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx2
from huggingface_hub import hf_hub_url
from huggingface_hub.utils import build_hf_headers, get_session

from app import TOOL_NAME, __version__
from app.engine.drafter.facts import is_drafter_architecture
from app.engine.gguf_header import metadata_prefix
from app.engine.hub.source import TIMEOUT

PEEK_BYTES = 64 * 1024


def mtp_blocks_in(metadata: Mapping[str, object]) -> int | None:
    """MTP blocks a GGUF's metadata declares: 0 once the model's keys were read without the key,
    None when the metadata ends before saying."""
    architecture = metadata.get("general.architecture")
    if not isinstance(architecture, str):
        return None
    if is_drafter_architecture(architecture):
        return 0  # a separate drafter model counts its own layers there: it is not a head
    value = metadata.get(f"{architecture}.nextn_predict_layers")
    if isinstance(value, int):
        return value
    return 0 if any(str(key).startswith("tokenizer.") for key in metadata) else None


def remote_mtp_blocks(
    repo_id: str, commit: str, path: str, *, endpoint: str, token: str | None
) -> int | None:
    """MTP blocks of ``path`` at ``commit`` of ``repo_id`` from one ranged read (None: unknown).

    At most :data:`PEEK_BYTES` are read even from a server that ignores ``Range``.
    """
    metadata = remote_metadata(repo_id, commit, path, endpoint=endpoint, token=token)
    return mtp_blocks_in(metadata) if metadata is not None else None


def remote_metadata(
    repo_id: str, commit: str, path: str, *, endpoint: str, token: str | None
) -> dict[str, object] | None:
    """The metadata keys in the first :data:`PEEK_BYTES` of ``path`` (None when the read fails;
    an empty dict when the bytes are not a GGUF)."""
    url = hf_hub_url(repo_id, path, revision=commit, endpoint=endpoint)
    headers = build_hf_headers(token=token, library_name=TOOL_NAME, library_version=__version__)
    headers.update({"Range": f"bytes=0-{PEEK_BYTES - 1}", "Accept-Encoding": "identity"})
    data = b""
    try:
        with get_session().stream(
            "GET", url, headers=headers, timeout=TIMEOUT, follow_redirects=True
        ) as response:
            if response.status_code not in (200, 206):
                return None
            for chunk in response.iter_bytes():
                data += chunk
                if len(data) >= PEEK_BYTES:
                    break
    except httpx2.HTTPError:
        return None
    return metadata_prefix(data[:PEEK_BYTES])
