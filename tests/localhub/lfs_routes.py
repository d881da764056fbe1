"""Git-LFS on the local hub: the batch API, uploads to the storage origin, verify, downloads.

Why: large files never travel inside a commit. The client asks the batch endpoint where to put
each object, PUTs the bytes *without* its token to a URL on another origin (basic: one PUT;
multipart: numbered part URLs, then a completion POST), asks the Hub to verify, and only then
names the object in a commit. Downloads of LFS files are 302-redirected to that storage origin.
The local hub reproduces each step so the client's real upload and download code runs, with
faults injectable in the middle of a body.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import secrets
from pathlib import PurePosixPath

from tests.localhub.auth import require_write
from tests.localhub.context import PendingUpload
from tests.localhub.errors import HubReply, repo_not_found
from tests.localhub.wire import CHUNK, HubHandler, Route

LFS_JSON = "application/vnd.git-lfs+json"
GIT_REPO = r"/(?P<namespace>[^/]+)/(?P<name>[^/]+?)\.git/info/lfs/objects"


def _writable_repo_id(handler: HubHandler, namespace: str, name: str) -> str:
    repo_id = f"{namespace}/{name}"
    identity = handler.identity()
    repo = handler.hub.store.repos.get(repo_id)
    if repo is None or (repo.private and not (identity and identity.owns(namespace))):
        raise repo_not_found(repo_id)
    require_write(identity, namespace)
    handler.repo_id = repo_id
    return repo_id


def batch(handler: HubHandler, namespace: str, name: str) -> None:
    repo_id = _writable_repo_id(handler, namespace, name)
    payload = handler.read_json()
    if payload.get("operation") != "upload":
        raise HubReply(400, "the local hub's batch API only handles uploads; download via /resolve")
    transfers = payload.get("transfers") or ["basic"]
    hub = handler.hub
    objects = []
    chosen = "basic"
    for item in payload.get("objects", []):
        oid, size = str(item.get("oid")), item.get("size")
        if not re.fullmatch(r"[0-9a-f]{64}", oid) or not isinstance(size, int) or size < 0:
            raise HubReply(400, f"invalid LFS object {item!r}: need a sha256 oid and a size")
        if hub.store.repo_has_lfs_object(repo_id, oid):
            objects.append({"oid": oid, "size": size})
            continue
        upload_id = secrets.token_hex(16)
        multipart = "multipart" in transfers and size >= hub.multipart_threshold
        chunk_size = hub.multipart_chunk_size if multipart else None
        if chunk_size:
            chosen = "multipart"
            header = {"chunk_size": str(chunk_size)}
            for number in range(1, math.ceil(size / chunk_size) + 1):
                header[f"{number:05d}"] = f"{hub.storage_url}/upload/{upload_id}/{number}"
            upload = {"href": f"{hub.api_url}/api/complete_multipart/{upload_id}", "header": header}
        else:
            upload = {"href": f"{hub.storage_url}/upload/{upload_id}"}
        with hub.uploads_lock:
            hub.uploads[upload_id] = PendingUpload(
                repo_id, oid, size, chunk_size, hub.store.new_temporary_path()
            )
        objects.append(
            {
                "oid": oid,
                "size": size,
                "authenticated": True,
                "actions": {
                    "upload": upload,
                    "verify": {"href": f"{hub.api_url}/{repo_id}.git/info/lfs/objects/verify"},
                },
            }
        )
    handler.send_json({"transfer": chosen, "objects": objects}, content_type=LFS_JSON)


def verify(handler: HubHandler, namespace: str, name: str) -> None:
    repo_id = _writable_repo_id(handler, namespace, name)
    payload = handler.read_json()
    oid, size = str(payload.get("oid")), payload.get("size")
    store = handler.hub.store
    if not store.repo_has_lfs_object(repo_id, oid):
        raise HubReply(404, f"LFS object {oid} was not uploaded to {repo_id}")
    stored = store.lfs_object_path(oid).stat().st_size
    if stored != size:
        raise HubReply(422, f"LFS object {oid} has {stored} bytes, not {size}")
    handler.send_json({"ok": True}, content_type=LFS_JSON)


def _pending(handler: HubHandler, upload_id: str) -> PendingUpload:
    with handler.hub.uploads_lock:
        pending = handler.hub.uploads.get(upload_id)
    if pending is None:
        raise HubReply(404, f"unknown or expired upload {upload_id}")
    handler.repo_id = pending.repo_id
    return pending


def _drop_after(handler: HubHandler, pending: PendingUpload) -> int | None:
    """Where an armed ``drop_upload`` fault cuts this request's body, if one applies."""
    drop = handler.hub.faults.take("drop_upload", pending.repo_id, body_size=handler.body_length)
    return drop.after_bytes if drop else None


def put_object(handler: HubHandler, upload_id: str) -> None:
    """Basic transfer: the whole object in one unauthenticated PUT, hashed as it arrives."""
    pending = _pending(handler, upload_id)
    store = handler.hub.store
    temporary = store.new_temporary_path()
    digest = hashlib.sha256()
    size = 0
    try:
        with open(temporary, "wb") as out:
            for chunk in handler.iter_body(CHUNK, _drop_after(handler, pending)):
                digest.update(chunk)
                out.write(chunk)
                size += len(chunk)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    sha256 = digest.hexdigest()
    if size != pending.size or sha256 != pending.sha256:
        temporary.unlink(missing_ok=True)
        raise HubReply(
            400,
            f"uploaded content ({size} bytes, sha256 {sha256}) does not match "
            f"the announced object ({pending.size} bytes, {pending.sha256})",
        )
    store.adopt_lfs_object(pending.repo_id, temporary, sha256)
    handler.send_bytes(b"", headers={"ETag": f'"{sha256[:32]}"'})


def put_part(handler: HubHandler, upload_id: str, number: str) -> None:
    """Multipart transfer: one part, written in place into the object being assembled."""
    pending = _pending(handler, upload_id)
    part = int(number)
    chunk = pending.chunk_size or 0
    parts_total = math.ceil(pending.size / chunk) if chunk else 0
    if not 1 <= part <= parts_total:
        raise HubReply(400, f"part {part} is outside 1..{parts_total}")
    if handler.hub.faults.take("fail_part", pending.repo_id, part_number=part):
        for _ in handler.iter_body():
            pass
        raise HubReply(500, f"injected failure on part {part}")
    expected = min(chunk, pending.size - (part - 1) * chunk)
    if handler.body_length is not None and handler.body_length != expected:
        raise HubReply(400, f"part {part} has {handler.body_length} bytes, expected {expected}")
    offset = (part - 1) * chunk
    received = 0
    descriptor = os.open(pending.assembly, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for piece in handler.iter_body(CHUNK, _drop_after(handler, pending)):
            os.pwrite(descriptor, piece, offset + received)
            received += len(piece)
    finally:
        os.close(descriptor)
    if received != expected:
        raise HubReply(400, f"part {part} has {received} bytes, expected {expected}")
    etag = f'"{secrets.token_hex(16)}"'
    with handler.hub.uploads_lock:
        pending.parts[part] = etag
    handler.send_bytes(b"", headers={"ETag": etag})


def complete_multipart(handler: HubHandler, upload_id: str) -> None:
    """Check every part arrived, hash the assembled object, and store it."""
    pending = _pending(handler, upload_id)
    payload = handler.read_json()
    listed = {int(p["partNumber"]): p["etag"] for p in payload.get("parts", [])}
    expected_parts = math.ceil(pending.size / (pending.chunk_size or 1))
    if payload.get("oid") != pending.sha256 or sorted(listed) != list(range(1, expected_parts + 1)):
        raise HubReply(400, "completion must name the object's oid and every part 1..n once")
    for number, etag in listed.items():
        if pending.parts.get(number) != etag:
            raise HubReply(400, f"part {number}: etag {etag} does not match an uploaded part")
    digest = hashlib.sha256()
    with open(pending.assembly, "rb") as assembled:
        while piece := assembled.read(CHUNK):
            digest.update(piece)
    if digest.hexdigest() != pending.sha256 or pending.assembly.stat().st_size != pending.size:
        raise HubReply(400, "the joined parts do not match the announced sha256 and size")
    handler.hub.store.adopt_lfs_object(pending.repo_id, pending.assembly, pending.sha256)
    with handler.hub.uploads_lock:
        handler.hub.uploads.pop(upload_id, None)
    handler.send_json({"ok": True}, content_type=LFS_JSON)


def serve_object(handler: HubHandler, namespace: str, name: str, sha256: str, path: str) -> None:
    """The storage origin's download URL (what a 302 from /resolve points at); no auth."""
    repo_id = f"{namespace}/{name}"
    store = handler.hub.store
    if repo_id not in store.repos or not store.repo_has_lfs_object(repo_id, sha256):
        raise HubReply(404, f"no object {sha256} for {repo_id}")
    headers = {
        "ETag": f'"{sha256}"',
        "Content-Disposition": f'inline; filename="{PurePosixPath(path).name}"',
    }
    handler.send_file(store.lfs_object_path(sha256), headers, repo_id=repo_id, file_path=path)


API_ROUTES: list[Route] = [
    ("POST", re.compile(rf"{GIT_REPO}/batch"), batch),
    ("POST", re.compile(rf"{GIT_REPO}/verify"), verify),
    ("POST", re.compile(r"/api/complete_multipart/(?P<upload_id>[0-9a-f]+)"), complete_multipart),
]

STORAGE_ROUTES: list[Route] = [
    ("PUT", re.compile(r"/upload/(?P<upload_id>[0-9a-f]+)"), put_object),
    ("PUT", re.compile(r"/upload/(?P<upload_id>[0-9a-f]+)/(?P<number>\d+)"), put_part),
    (
        "GET",
        re.compile(
            r"/lfs/(?P<namespace>[^/]+)/(?P<name>[^/]+)/(?P<sha256>[0-9a-f]{64})/(?P<path>.+)"
        ),
        serve_object,
    ),
]
