"""The Hub's model listing, ``GET /api/models``, as ``huggingface_hub``'s ``list_models`` calls it.

Why: search ("which repos hold a GGUF of this model?") is tested with the real client, so the
local hub answers the query parameters ``list_models`` 2.4 sends — ``search`` (a case-insensitive
part of the repo id), ``author``, ``filter`` (repeatable; every one must be a tag of the repo),
``sort`` (``downloads``, ``likes``, ``createdAt``, ``lastModified``, ``trendingScore``),
``direction`` (``-1``, the Hub's only order today, or ``1``), ``limit``, ``full`` and ``expand``
(repeatable) — and pages with a ``Link: <…>; rel="next"`` header as the Hub does.

Shapes follow the Hub: without ``full`` or ``expand`` an item has the short field set (id, likes,
downloads, tags, library name, createdAt…); ``full`` adds author, sha, lastModified and
``siblings`` (file names only: sizes come from ``model_info(files_metadata=True)``); ``expand``
returns ``_id``, ``id`` and exactly the properties asked for.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any
from urllib.parse import urlencode

from tests.localhub.cardmeta import front_matter
from tests.localhub.errors import HubReply
from tests.localhub.repotags import repo_tags
from tests.localhub.store import Commit, Repo, iso_time
from tests.localhub.wire import HubHandler, Route

PAGE_SIZE = 1000
SORT_KEYS = ("downloads", "likes", "createdAt", "lastModified", "trendingScore")
SHORT_FIELDS = (
    "_id",
    "id",
    "likes",
    "trendingScore",
    "private",
    "downloads",
    "tags",
    "pipeline_tag",
    "library_name",
    "createdAt",
    "modelId",
)
FULL_FIELDS = (*SHORT_FIELDS, "author", "sha", "lastModified", "gated", "disabled", "siblings")


def card_of(handler: HubHandler, commit: Commit) -> dict[str, object] | None:
    """The card metadata of a commit's README.md (None without front matter)."""
    readme = commit.files.get("README.md")
    if readme is None or readme.sha256:
        return None
    return front_matter(handler.hub.store.content_path(readme).read_text(errors="replace"))


def repo_fields(handler: HubHandler, repo: Repo, commit: Commit) -> dict[str, Any]:
    """Every listing property of a repo at ``commit``, named as the Hub names them."""
    card = card_of(handler, commit)
    library = (card or {}).get("library_name")
    namespace = repo.repo_id.split("/")[0]
    stats = handler.hub.repo_stats.get(repo.repo_id, {})
    return {
        "_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24],
        "id": repo.repo_id,
        "modelId": repo.repo_id,
        "author": namespace,
        "sha": commit.oid,
        "lastModified": iso_time(commit.created_at),
        "createdAt": iso_time(repo.created_at),
        "private": repo.private,
        "disabled": False,
        "gated": False,
        "downloads": int(stats.get("downloads", 0)),
        "likes": int(stats.get("likes", 0)),
        "trendingScore": int(stats.get("trendingScore", 0)),
        "tags": repo_tags(card, commit.files),
        "pipeline_tag": (card or {}).get("pipeline_tag"),
        "library_name": library if isinstance(library, str) else None,
        "siblings": [{"rfilename": path} for path in commit.files],
        "cardData": card,
    }


def _visible(handler: HubHandler, repo: Repo) -> bool:
    identity = handler.identity()
    return not repo.private or bool(identity and identity.owns(repo.repo_id.split("/")[0]))


def list_models(handler: HubHandler) -> None:
    query = handler.query_lists
    search = (handler.query.get("search") or "").lower()
    author = handler.query.get("author")
    filters = [value for value in query.get("filter", []) if value]
    sort = handler.query.get("sort")
    if sort is not None and sort not in SORT_KEYS:
        raise HubReply(400, f"Invalid sort parameter {sort!r}; expected one of {SORT_KEYS}")
    direction = handler.query.get("direction", "-1")
    if direction not in ("-1", "1"):
        raise HubReply(400, f"Invalid direction {direction!r}; expected -1 or 1")
    limit = _positive(handler.query.get("limit"), "limit")
    offset = _positive(handler.query.get("cursor"), "cursor") or 0
    expand = [value for value in query.get("expand", []) if value]
    full = handler.query.get("full", "").lower() in ("1", "true")
    if expand and full:
        raise HubReply(400, "expand cannot be combined with full")
    items = []
    with handler.hub.store.lock:
        repos = list(handler.hub.store.repos.values())
    for repo in repos:
        commit = repo.resolve("main")
        if commit is None or not _visible(handler, repo):
            continue
        if search and search not in repo.repo_id.lower():
            continue
        if author and repo.repo_id.split("/")[0] != author:
            continue
        fields = repo_fields(handler, repo, commit)
        if any(tag not in fields["tags"] for tag in filters):
            continue
        exact_times = {"createdAt": repo.created_at, "lastModified": commit.created_at}
        items.append((fields, exact_times))
    if sort is not None:
        items.sort(key=lambda pair: pair[1].get(sort, pair[0][sort]), reverse=direction == "-1")
    page_size = min(limit or PAGE_SIZE, PAGE_SIZE)
    page = items[offset : offset + page_size]
    headers = {}
    if offset + page_size < len(items) and (limit is None or limit > page_size):
        rest = {key: values for key, values in query.items() if key != "cursor"}
        rest["cursor"] = [str(offset + page_size)]
        url = f"{handler.hub.api_url}/api/models?{urlencode(rest, doseq=True)}"
        headers["Link"] = f'<{url}>; rel="next"'
    handler.send_json([_shaped(item, full, expand) for item, _ in page], headers=headers)


def _shaped(item: dict[str, Any], full: bool, expand: list[str]) -> dict[str, Any]:
    if expand:
        unknown = [name for name in expand if name not in item]
        if unknown:
            raise HubReply(400, f"Invalid expand property {unknown[0]!r}")
        return {"_id": item["_id"], "id": item["id"], **{name: item[name] for name in expand}}
    return {name: item[name] for name in (FULL_FIELDS if full else SHORT_FIELDS)}


def _positive(value: str | None, name: str) -> int | None:
    if value is None:
        return None
    if not re.fullmatch(r"\d+", value):
        raise HubReply(400, f"Invalid {name} {value!r}: expected a whole number")
    return int(value)


ROUTES: list[Route] = [("GET", re.compile(r"/api/models"), list_models)]
