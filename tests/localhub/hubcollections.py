"""Hub collections (named, ordered lists of repos owned by a user or an org), kept on disk.

Why: publishing files each sidecar into the owner's "MTP Sidecars" collection; tests check that
the collection is created once, that the item is added once (409 on a duplicate, as on the Hub),
and that the real client can parse every answer (it requires ``slug, title, owner, items,
lastUpdated, position, private, theme, upvotes`` and items with ``_id, id, type, position``).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import threading
import time
from pathlib import Path

from tests.localhub.errors import HubReply
from tests.localhub.store import iso_time


def _slugify(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "collection"


class CollectionBook:
    """Every collection of one local hub, persisted in ``collections.json``."""

    def __init__(self, data_dir: Path) -> None:
        self._file = Path(data_dir) / "collections.json"
        self._lock = threading.Lock()
        self._collections: dict[str, dict] = {}
        if self._file.exists():
            self._collections = json.loads(self._file.read_text())

    def _save(self) -> None:
        temporary = self._file.with_suffix(".json.tmp")
        temporary.write_text(json.dumps(self._collections))
        os.replace(temporary, self._file)

    def reset(self) -> None:
        with self._lock:
            self._collections.clear()
            self._save()

    def create(self, namespace: str, title: str, description: str | None, private: bool) -> dict:
        """A new collection; 409 carrying the existing slug when the owner has that title."""
        with self._lock:
            for collection in self._collections.values():
                if collection["owner"]["name"] == namespace and collection["title"] == title:
                    raise HubReply(
                        409,
                        f"Collection {title!r} already exists for {namespace}",
                        body={"error": "Collection already exists", "slug": collection["slug"]},
                    )
            slug = f"{namespace}/{_slugify(title)}-{secrets.token_hex(12)}"
            position = sum(1 for c in self._collections.values() if c["owner"]["name"] == namespace)
            self._collections[slug] = {
                "slug": slug,
                "title": title,
                "description": description,
                "owner": {"name": namespace, "type": "user"},
                "items": [],
                "lastUpdated": iso_time(time.time()),
                "position": position,
                "private": private,
                "theme": "default",
                "upvotes": 0,
            }
            self._save()
            return self._collections[slug]

    def get(self, slug: str) -> dict:
        collection = self._collections.get(slug)
        if collection is None:
            raise HubReply(404, f"Collection {slug} not found", "CollectionNotFound")
        return collection

    def owned_by(self, owner: str | None) -> list[dict]:
        return [
            c for c in self._collections.values() if owner is None or c["owner"]["name"] == owner
        ]

    def add_item(self, slug: str, item_id: str, item_type: str, note: str | None) -> dict:
        """Append an item; 409 when that item is already in the collection."""
        with self._lock:
            collection = self.get(slug)
            if any(i["id"] == item_id and i["type"] == item_type for i in collection["items"]):
                raise HubReply(409, f"{item_type} {item_id} is already in {slug}")
            item: dict = {
                "_id": secrets.token_hex(12),
                "id": item_id,
                "type": item_type,
                "position": len(collection["items"]),
            }
            if note:
                item["note"] = {"text": note, "html": note}
            collection["items"].append(item)
            collection["lastUpdated"] = iso_time(time.time())
            self._save()
            return collection
