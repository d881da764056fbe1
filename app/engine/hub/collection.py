"""Filing a published sidecar into its owner's "MTP Sidecars" collection on the Hub.

Why: one collection per owner lists every sidecar they publish, so users find the sidecar of any
model from one page. It is created the first time (found by title afterwards) and each repo is
added once (``exists_ok``). Users who do not want it turn it off in Settings or with
``MTP_STUDIO_COLLECTION=none|0|false|no|off``.
"""

from __future__ import annotations

import os

from huggingface_hub import HfApi

COLLECTION_TITLE = "MTP Sidecars"
COLLECTION_DESCRIPTION = "MTP heads extracted in BF16 from original releases, for MTP drafting."
COLLECTION_ENV = "MTP_STUDIO_COLLECTION"
DISABLING_VALUES = frozenset({"none", "0", "false", "no", "off"})


def collection_enabled(setting: bool = True) -> bool:
    """The setting, overridden to off by ``MTP_STUDIO_COLLECTION`` set to a disabling value."""
    return setting and os.environ.get(COLLECTION_ENV, "").strip().lower() not in DISABLING_VALUES


def file_into_collection(
    api: HfApi, owner: str, repo_id: str, title: str = COLLECTION_TITLE
) -> str:
    """Add ``repo_id`` to ``owner``'s collection ``title`` (created if missing); returns its URL."""
    slug = next((c.slug for c in api.list_collections(owner=owner) if c.title == title), None)
    if slug is None:
        slug = api.create_collection(
            title, namespace=owner, description=COLLECTION_DESCRIPTION, exists_ok=True
        ).slug
    return api.add_collection_item(slug, repo_id, "model", exists_ok=True).url
