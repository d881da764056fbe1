"""Everything a request handler of the local hub can reach: state, policy, counters, faults.

Why a separate object: two HTTP servers (the main API and the storage origin) share one state,
and the handlers must not depend on how the servers are started.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from tests.localhub.auth import TokenPolicy
from tests.localhub.faults import FaultPlan
from tests.localhub.hubcollections import CollectionBook
from tests.localhub.store import HubStore
from tests.localhub.traffic import Traffic


@dataclass
class PendingUpload:
    """An upload URL handed out by the LFS batch endpoint and not yet completed."""

    repo_id: str
    sha256: str
    size: int
    chunk_size: int | None  # set for multipart uploads
    assembly: Path  # where a multipart object is put together, part by part, in place
    parts: dict[int, str] = field(default_factory=dict)  # part number -> etag


@dataclass
class HubContext:
    store: HubStore
    collections: CollectionBook
    policy: TokenPolicy
    traffic: Traffic = field(default_factory=Traffic)
    faults: FaultPlan = field(default_factory=FaultPlan)
    api_url: str = ""  # e.g. http://127.0.0.1:8123, set once the servers are bound
    storage_url: str = ""  # e.g. http://127.0.0.2:8124
    redirect_lfs: bool = True  # answer LFS resolves with 302 to the storage origin
    multipart_threshold: int = 64 * 1024 * 1024  # LFS objects at least this big go multipart
    multipart_chunk_size: int = 16 * 1024 * 1024
    uploads: dict[str, PendingUpload] = field(default_factory=dict)
    uploads_lock: threading.Lock = field(default_factory=threading.Lock)
    verbose: bool = False
    repo_stats: dict[str, dict[str, int]] = field(default_factory=dict)
    """repo id → counters the listing sorts by (``downloads``, ``likes``, ``trendingScore``)."""
    forged_listing: dict[tuple[str, str], dict[str, object]] = field(default_factory=dict)
    """(repo id, stored path) → fields that the tree listing shows instead of the true ones, so
    tests can play a hostile Hub: a path that climbs out, an id that is not hex."""
