"""The collections API of the local hub: list by owner, create, get, add an item.

Why: the publish flow files each sidecar into its owner's "MTP Sidecars" collection with the real
client's ``list_collections`` / ``create_collection`` / ``add_collection_item(exists_ok=True)``.
"""

from __future__ import annotations

import re

from tests.localhub.auth import require_write
from tests.localhub.errors import HubReply
from tests.localhub.wire import HubHandler, Route

SLUG = r"(?P<slug>[^/]+/[^/]+)"


def list_collections(handler: HubHandler) -> None:
    identity = handler.identity()
    visible = [
        c
        for c in handler.hub.collections.owned_by(handler.query.get("owner"))
        if not c["private"] or (identity and identity.owns(c["owner"]["name"]))
    ]
    # The client numbers listed collections itself: a listing carries no "position".
    handler.send_json([{k: v for k, v in c.items() if k != "position"} for c in visible])


def create_collection(handler: HubHandler) -> None:
    identity = handler.identity()
    payload = handler.read_json()
    namespace = str(payload.get("namespace") or (identity.name if identity else ""))
    require_write(identity, namespace)
    title = str(payload.get("title") or "").strip()
    if not title:
        raise HubReply(400, "a collection needs a title")
    collection = handler.hub.collections.create(
        namespace, title, payload.get("description"), bool(payload.get("private"))
    )
    handler.send_json(collection)


def get_collection(handler: HubHandler, slug: str) -> None:
    collection = handler.hub.collections.get(slug)
    identity = handler.identity()
    if collection["private"] and not (identity and identity.owns(collection["owner"]["name"])):
        raise HubReply(404, f"Collection {slug} not found", "CollectionNotFound")
    handler.send_json(collection)


def add_item(handler: HubHandler, slug: str) -> None:
    collection = handler.hub.collections.get(slug)
    require_write(handler.identity(), collection["owner"]["name"])
    payload = handler.read_json()
    item = payload.get("item") or {}
    item_id, item_type = str(item.get("id") or ""), str(item.get("type") or "")
    if item_type != "model":
        raise HubReply(400, f"the local hub only files models in collections, not {item_type!r}")
    if item_id not in handler.hub.store.repos:
        raise HubReply(404, f"model {item_id} does not exist", "RepoNotFound")
    handler.send_json(
        handler.hub.collections.add_item(slug, item_id, item_type, payload.get("note"))
    )


ROUTES: list[Route] = [
    ("GET", re.compile(r"/api/collections"), list_collections),
    ("POST", re.compile(r"/api/collections"), create_collection),
    ("GET", re.compile(rf"/api/collections/{SLUG}"), get_collection),
    ("POST", re.compile(rf"/api/collections/{SLUG}/items"), add_item),
]
