"""Everything that talks to the Hugging Face Hub for a publish: source, pre-flight, upload, card.

Public API:

* :func:`publish_sidecar` (``plan, options, ctx`` → :class:`PublishResult`) — the publish job the
  CLI and the GUI's publish wizard both run; :class:`PublishOptions` says how.
* :func:`pin_repo` + :class:`HubSource` — a Hub repo pinned to one commit as a
  ``CheckpointSource`` for :func:`app.engine.mtp.extract_mtp` (ranged reads only).
* :func:`resolve_token`, :func:`check_write_access` — the write pre-flight.
* :func:`collection_enabled` — whether sidecars are filed into the "MTP Sidecars" collection.
"""

from app.engine.hub.access import HubAccount, check_write_access, resolve_token
from app.engine.hub.collection import COLLECTION_TITLE, collection_enabled
from app.engine.hub.publish import (
    ALREADY_PUBLISHED,
    PUBLISHED,
    PublishOptions,
    PublishResult,
    publish_sidecar,
    resolve_endpoint,
)
from app.engine.hub.source import HubSource, PinnedRepo, pin_repo

__all__ = [
    "ALREADY_PUBLISHED",
    "COLLECTION_TITLE",
    "PUBLISHED",
    "HubAccount",
    "HubSource",
    "PinnedRepo",
    "PublishOptions",
    "PublishResult",
    "check_write_access",
    "collection_enabled",
    "pin_repo",
    "publish_sidecar",
    "resolve_endpoint",
    "resolve_token",
]
