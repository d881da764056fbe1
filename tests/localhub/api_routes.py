"""The local hub's main API: accounts, repositories, files, commits.

The wire protocol: docs/development.md#the-wire-protocol-it-speaks.

Why: these are the exact endpoints and JSON shapes that ``huggingface_hub`` 2.4 sends and parses
for whoami, create_repo, model_info, list_repo_tree, get_paths_info, file_exists/hf_hub_download
(``/resolve``), preupload and create_commit, so the real client runs unmodified against it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from typing import Any

from tests.localhub.auth import INVALID_CREDENTIALS, require_write
from tests.localhub.cardmeta import front_matter
from tests.localhub.errors import HubReply, entry_not_found, repo_not_found, revision_not_found
from tests.localhub.gitobjects import stored_in_lfs
from tests.localhub.listing_routes import repo_fields
from tests.localhub.store import (
    AddLfs,
    AddRegular,
    Commit,
    Delete,
    FileEntry,
    Operation,
    Repo,
    iso_time,
)
from tests.localhub.wire import HubHandler, Route

SEGMENT = r"[^/]+"
REPO = rf"(?P<namespace>{SEGMENT})/(?P<name>{SEGMENT})"
MODEL = rf"/api/models/{REPO}"


def _truthy(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true", "yes")


def _readable_repo(handler: HubHandler, namespace: str, name: str) -> Repo:
    """The repo if the caller may see it (private repos only for their owners)."""
    repo_id = f"{namespace}/{name}"
    identity = handler.identity()
    repo = handler.hub.store.repos.get(repo_id)
    if repo is None or (repo.private and not (identity and identity.owns(namespace))):
        raise repo_not_found(repo_id)
    handler.repo_id = repo_id
    return repo


def _commit_at(repo: Repo, revision: str) -> Commit:
    commit = repo.resolve(revision)
    if commit is None:
        raise revision_not_found(repo.repo_id, revision)
    return commit


def _folders(files: dict[str, FileEntry]) -> dict[str, str]:
    """Every folder of a tree with a stable tree id (SHA-1 over its children)."""
    children: dict[str, list[str]] = {}
    for path, entry in files.items():
        parts = path.split("/")
        for depth in range(1, len(parts)):
            children.setdefault("/".join(parts[:depth]), []).append(f"{entry.oid} {path}")
    return {
        folder: hashlib.sha1("\n".join(sorted(lines)).encode()).hexdigest()
        for folder, lines in children.items()
    }


def _file_json(entry: FileEntry) -> dict[str, Any]:
    value: dict[str, Any] = {
        "type": "file",
        "oid": entry.oid,
        "size": entry.size,
        "path": entry.path,
    }
    if entry.sha256:
        value["lfs"] = {"oid": entry.sha256, "size": entry.size, "pointerSize": entry.pointer_size}
    return value


def _listed_file_json(handler: HubHandler, repo_id: str, entry: FileEntry) -> dict[str, Any]:
    """An entry as the tree listing shows it, with any forged fields a test asked for."""
    value = _file_json(entry)
    forged = dict(handler.hub.forged_listing.get((repo_id, entry.path), {}))
    if "lfs_oid" in forged and "lfs" in value:
        value["lfs"] = {**value["lfs"], "oid": forged.pop("lfs_oid")}
    value.update(forged)
    return value


def _forged_entry(handler: HubHandler, repo_id: str, commit: Commit, path: str) -> FileEntry | None:
    """The stored file a forged listing shows under ``path``: a hostile Hub serves what it lists."""
    for (forged_repo, stored), fields in handler.hub.forged_listing.items():
        if forged_repo == repo_id and fields.get("path") == path and stored in commit.files:
            return commit.files[stored]
    return None


def _folder_json(path: str, oid: str) -> dict[str, Any]:
    return {"type": "directory", "oid": oid, "size": 0, "path": path}


# -- account ---------------------------------------------------------------------------------


def whoami(handler: HubHandler) -> None:
    identity = handler.identity()
    if identity is None:
        raise HubReply(401, INVALID_CREDENTIALS)
    handler.send_json(
        {
            "type": "user",
            "id": hashlib.sha1(identity.name.encode()).hexdigest()[:24],
            "name": identity.name,
            "fullname": identity.name,
            "isPro": False,
            "canPay": False,
            "orgs": [{"type": "org", "name": org, "roleInOrg": "write"} for org in identity.orgs],
            "auth": {
                "type": "access_token",
                "accessToken": {"displayName": "localhub", "role": identity.role},
            },
        }
    )


def validate_yaml(handler: HubHandler) -> None:
    content = str(handler.read_json().get("content", ""))
    lines = content.splitlines()
    if lines and lines[0].strip() == "---" and front_matter(content) is None:
        handler.send_json(
            {"errors": [{"message": "YAML front matter is not closed by '---'"}], "warnings": []},
            400,
        )
        return
    handler.send_json({"errors": [], "warnings": []})


# -- repositories ----------------------------------------------------------------------------


def create_repo(handler: HubHandler) -> None:
    identity = handler.identity()
    payload = handler.read_json()
    if payload.get("type", "model") not in ("model", None):
        raise HubReply(400, "the local hub only hosts model repositories")
    name = str(payload.get("name") or "")
    if identity is None:
        raise HubReply(401, "You must be authenticated to create a repo")
    namespace = str(payload.get("organization") or identity.name)
    require_write(identity, namespace)
    repo_id = f"{namespace}/{name}"
    url = f"{handler.hub.api_url}/{repo_id}"
    private = payload.get("visibility") == "private" or bool(payload.get("private"))
    if not handler.hub.store.create_repo(repo_id, private=private, author=identity.name):
        raise HubReply(
            409,
            "You already created this model repo",
            body={"error": "You already created this model repo", "url": url},
        )
    handler.repo_id = repo_id
    handler.send_json({"url": url, "name": repo_id})


def delete_repo(handler: HubHandler) -> None:
    identity = handler.identity()
    payload = handler.read_json()
    namespace = str(payload.get("organization") or (identity.name if identity else ""))
    require_write(identity, namespace)
    handler.hub.store.delete_repo(f"{namespace}/{payload.get('name')}")
    handler.send_json({})


def model_info(handler: HubHandler, namespace: str, name: str, revision: str = "main") -> None:
    repo = _readable_repo(handler, namespace, name)
    commit = _commit_at(repo, revision)
    blobs = _truthy(handler.query.get("blobs"))
    siblings = []
    for entry in commit.files.values():
        sibling: dict[str, Any] = {"rfilename": entry.path}
        if blobs:
            sibling.update(size=entry.size, blobId=entry.oid)
            if entry.sha256:
                sibling["lfs"] = {
                    "sha256": entry.sha256,
                    "size": entry.size,
                    "pointerSize": entry.pointer_size,
                }
        siblings.append(sibling)
    fields = repo_fields(handler, repo, commit)
    info: dict[str, Any] = {
        name: fields[name]
        for name in (
            "_id",
            "id",
            "modelId",
            "author",
            "sha",
            "lastModified",
            "createdAt",
            "private",
            "disabled",
            "gated",
            "downloads",
            "likes",
            "tags",
            "library_name",
        )
    }
    info["author"] = namespace
    info["siblings"] = siblings
    if fields["cardData"] is not None:
        info["cardData"] = fields["cardData"]
    handler.send_json(info)


def auth_check(handler: HubHandler, namespace: str, name: str, write: str = "") -> None:
    repo_id = f"{namespace}/{name}"
    identity = handler.identity()
    repo = handler.hub.store.repos.get(repo_id)
    if repo is None or (repo.private and not (identity and identity.owns(namespace))):
        raise repo_not_found(repo_id)
    if write:
        require_write(identity, namespace)
    handler.send_json({"ok": True})


def tree(handler: HubHandler, namespace: str, name: str, revision: str, path: str = "") -> None:
    repo = _readable_repo(handler, namespace, name)
    commit = _commit_at(repo, revision)
    folders = _folders(dict(commit.files))
    prefix = path.strip("/")
    if prefix and prefix not in folders:
        raise entry_not_found(repo.repo_id, prefix, commit.oid)
    recursive = _truthy(handler.query.get("recursive"))
    base = f"{prefix}/" if prefix else ""
    depth = base.count("/")
    entries: list[dict[str, Any]] = []
    for folder, oid in sorted(folders.items()):
        if folder.startswith(base) and (recursive or folder.count("/") == depth):
            entries.append(_folder_json(folder, oid))
    for file_path, entry in sorted(commit.files.items()):
        if file_path.startswith(base) and (recursive or file_path.count("/") == depth):
            entries.append(_listed_file_json(handler, repo.repo_id, entry))
    handler.send_json(entries)


def paths_info(handler: HubHandler, namespace: str, name: str, revision: str) -> None:
    repo = _readable_repo(handler, namespace, name)
    commit = _commit_at(repo, revision)
    folders = _folders(dict(commit.files))
    found: list[dict[str, Any]] = []
    for path in handler.read_form().get("paths", []):
        path = path.strip("/")
        if path in commit.files:
            found.append(_file_json(commit.files[path]))
        elif path in folders:
            found.append(_folder_json(path, folders[path]))
    handler.send_json(found)


def refs(handler: HubHandler, namespace: str, name: str) -> None:
    repo = _readable_repo(handler, namespace, name)
    branches = [
        {"name": branch, "ref": f"refs/heads/{branch}", "targetCommit": oid}
        for branch, oid in sorted(repo.branches.items())
    ]
    handler.send_json({"branches": branches, "converts": [], "tags": []})


def commits(handler: HubHandler, namespace: str, name: str, revision: str) -> None:
    repo = _readable_repo(handler, namespace, name)
    commit: Commit | None = _commit_at(repo, revision)
    history = []
    while commit is not None:
        history.append(
            {
                "id": commit.oid,
                "title": commit.summary,
                "message": commit.description,
                "authors": [{"user": commit.author}],
                "date": iso_time(commit.created_at),
            }
        )
        commit = repo.commits.get(commit.parent) if commit.parent else None
    handler.send_json(history)


# -- files -----------------------------------------------------------------------------------


def resolve(handler: HubHandler, namespace: str, name: str, revision: str, path: str) -> None:
    """A file at a revision; LFS files redirect to the storage origin (or are served inline)."""
    repo = _readable_repo(handler, namespace, name)
    commit = _commit_at(repo, revision)
    entry = commit.files.get(path) or _forged_entry(handler, repo.repo_id, commit, path)
    if entry is None:
        raise entry_not_found(repo.repo_id, path, commit.oid)
    headers = {"X-Repo-Commit": commit.oid, "ETag": f'"{entry.oid}"'}
    if entry.sha256:
        headers.update({"X-Linked-Etag": f'"{entry.sha256}"', "X-Linked-Size": str(entry.size)})
        if handler.hub.redirect_lfs:
            location = f"{handler.hub.storage_url}/lfs/{repo.repo_id}/{entry.sha256}/{path}"
            handler.repo_id, handler.file_path = repo.repo_id, path
            handler.send_bytes(b"", 302, headers={**headers, "Location": location})
            return
    handler.send_file(
        handler.hub.store.content_path(entry), headers, repo_id=repo.repo_id, file_path=path
    )


# -- writing ---------------------------------------------------------------------------------


def preupload(handler: HubHandler, namespace: str, name: str, revision: str) -> None:
    repo = _readable_repo(handler, namespace, name)
    require_write(handler.identity(), namespace)
    current = repo.resolve(revision)
    answers = []
    for item in handler.read_json().get("files", []):
        path, size = str(item["path"]), int(item["size"])
        sample = base64.b64decode(item.get("sample", ""))
        lfs = stored_in_lfs(path, size) or b"\0" in sample
        existing = current.files.get(path) if current else None
        oid = (existing.sha256 or existing.oid) if existing else None
        answers.append(
            {
                "path": path,
                "uploadMode": "lfs" if lfs else "regular",
                "shouldIgnore": False,
                "oid": oid,
            }
        )
    handler.send_json({"files": answers, "commitOid": current.oid if current else None})


def commit(handler: HubHandler, namespace: str, name: str, revision: str) -> None:
    repo = _readable_repo(handler, namespace, name)
    identity = require_write(handler.identity(), namespace)
    if _truthy(handler.query.get("create_pr")):
        raise HubReply(400, "the local hub does not support pull requests")
    if revision not in repo.branches:
        if repo.resolve(revision) is not None:
            raise HubReply(400, f"cannot commit to {revision}: commit to a branch")
        raise revision_not_found(repo.repo_id, revision)
    header: dict[str, Any] = {}
    operations: list[Operation] = []
    for line in handler.read_body().splitlines():
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            key, value = item["key"], item["value"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise HubReply(400, f"malformed commit line: {line[:200]!r}") from None
        if key == "header":
            header = value
        else:
            operations.append(_operation(key, value))
    summary = str(header.get("summary") or "")
    if not summary:
        raise HubReply(400, "a commit needs a summary")
    made = handler.hub.store.commit(
        repo.repo_id,
        revision,
        operations,
        summary,
        str(header.get("description") or ""),
        header.get("parentCommit"),
        identity.name,
    )
    handler.send_json(
        {
            "success": True,
            "commitOid": made.oid,
            "commitUrl": f"{handler.hub.api_url}/{repo.repo_id}/commit/{made.oid}",
            "commitMessage": summary,
            "hookOutput": "",
            "pullRequestUrl": None,
        }
    )


def _operation(key: str, value: dict[str, Any]) -> Operation:
    path = str(value.get("path", "")).strip("/")
    if not path or ".." in path.split("/"):
        raise HubReply(400, f"invalid path {path!r} in commit")
    if key == "file":
        try:
            content = base64.b64decode(value["content"], validate=True)
        except (KeyError, binascii.Error):
            raise HubReply(400, f"{path}: content is not valid base64") from None
        if stored_in_lfs(path, len(content)):
            raise HubReply(
                400, f"{path} must be uploaded through LFS (binary or large files are refused)"
            )
        return AddRegular(path, content)
    if key == "lfsFile":
        if value.get("algo", "sha256") != "sha256" or not re.fullmatch(
            r"[0-9a-f]{64}", str(value.get("oid"))
        ):
            raise HubReply(400, f"{path}: lfsFile needs a sha256 oid")
        size = value.get("size")
        return AddLfs(path, str(value["oid"]), int(size) if size is not None else None)
    if key in ("deletedFile", "deletedFolder"):
        return Delete(path, folder=key == "deletedFolder")
    raise HubReply(400, f"unknown commit operation {key!r}")


ROUTES: list[Route] = [
    ("GET", re.compile(r"/api/whoami-v2"), whoami),
    ("POST", re.compile(r"/api/validate-yaml"), validate_yaml),
    ("POST", re.compile(r"/api/repos/create"), create_repo),
    ("DELETE", re.compile(r"/api/repos/delete"), delete_repo),
    ("GET", re.compile(MODEL), model_info),
    ("GET", re.compile(rf"{MODEL}/revision/(?P<revision>{SEGMENT})"), model_info),
    ("GET", re.compile(rf"{MODEL}/auth-check(?P<write>/write)?"), auth_check),
    ("GET", re.compile(rf"{MODEL}/tree/(?P<revision>{SEGMENT})(?:/(?P<path>.+))?"), tree),
    ("POST", re.compile(rf"{MODEL}/paths-info/(?P<revision>{SEGMENT})"), paths_info),
    ("GET", re.compile(rf"{MODEL}/refs"), refs),
    ("GET", re.compile(rf"{MODEL}/commits/(?P<revision>{SEGMENT})"), commits),
    ("POST", re.compile(rf"{MODEL}/preupload/(?P<revision>{SEGMENT})"), preupload),
    ("POST", re.compile(rf"{MODEL}/commit/(?P<revision>{SEGMENT})"), commit),
    ("GET", re.compile(rf"/{REPO}/resolve/(?P<revision>{SEGMENT})/(?P<path>.+)"), resolve),
]
