"""Repositories with real commits, kept on disk: the state behind the local hub.

Why: the behaviour under test depends on commits being real — a job pins a 40-hex commit id and
must keep reading that commit while ``main`` moves on; a commit with a stale ``parentCommit`` must
be refused; an LFS object must be uploaded before a commit may name it. So every commit here is an
immutable file tree with a parent, branches are pointers that move, regular file contents are kept
by git blob id and LFS objects by SHA-256, and the whole state survives a restart of
``python -m tests.localhub --data DIR``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests.localhub.errors import HubReply, entry_not_found, repo_not_found
from tests.localhub.gitobjects import (
    DEFAULT_GITATTRIBUTES,
    git_blob_oid,
    lfs_pointer,
    stored_in_lfs,
)

REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
FULL_OID = re.compile(r"^[0-9a-f]{40}$")
HASH_CHUNK = 4 * 1024 * 1024


def iso_time(timestamp: float) -> str:
    """The Hub's timestamp format: ``2024-05-01T12:00:00.000Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(timestamp)) + ".000Z"


@dataclass(frozen=True)
class FileEntry:
    """One file of a commit's tree."""

    path: str
    size: int
    oid: str  # git blob id of the content, or of the LFS pointer for LFS files
    sha256: str | None = None  # the LFS object id; None for a regular git file

    @property
    def is_lfs(self) -> bool:
        return self.sha256 is not None

    @property
    def pointer_size(self) -> int:
        return len(lfs_pointer(self.sha256 or "", self.size))

    def to_json(self) -> dict:
        return {"path": self.path, "size": self.size, "oid": self.oid, "sha256": self.sha256}

    @classmethod
    def from_json(cls, raw: Mapping) -> FileEntry:
        return cls(raw["path"], raw["size"], raw["oid"], raw.get("sha256"))


@dataclass(frozen=True)
class Commit:
    """An immutable snapshot: a file tree, its parent and its message."""

    oid: str
    parent: str | None
    summary: str
    description: str
    author: str
    created_at: float
    files: Mapping[str, FileEntry]

    def to_json(self) -> dict:
        return {
            "oid": self.oid,
            "parent": self.parent,
            "summary": self.summary,
            "description": self.description,
            "author": self.author,
            "created_at": self.created_at,
            "files": [entry.to_json() for entry in self.files.values()],
        }

    @classmethod
    def from_json(cls, raw: Mapping) -> Commit:
        files = {entry["path"]: FileEntry.from_json(entry) for entry in raw["files"]}
        return cls(
            raw["oid"],
            raw["parent"],
            raw["summary"],
            raw["description"],
            raw["author"],
            raw["created_at"],
            files,
        )


@dataclass
class Repo:
    """A model repository: its commits, its branches and the LFS objects uploaded to it."""

    repo_id: str
    private: bool
    created_at: float
    branches: dict[str, str] = field(default_factory=dict)
    commits: dict[str, Commit] = field(default_factory=dict)
    lfs_objects: set[str] = field(default_factory=set)

    def resolve(self, revision: str) -> Commit | None:
        """A branch name or a commit id (full, or a prefix of at least 7 hex digits)."""
        if revision in self.branches:
            return self.commits[self.branches[revision]]
        if revision in self.commits:
            return self.commits[revision]
        if len(revision) >= 7 and re.fullmatch(r"[0-9a-f]+", revision):
            matches = [oid for oid in self.commits if oid.startswith(revision)]
            if len(matches) == 1:
                return self.commits[matches[0]]
        return None

    @property
    def last_modified(self) -> float:
        head = self.commits.get(self.branches.get("main", ""))
        return head.created_at if head else self.created_at

    def to_json(self) -> dict:
        return {
            "repo_id": self.repo_id,
            "private": self.private,
            "created_at": self.created_at,
            "branches": self.branches,
            "commits": [commit.to_json() for commit in self.commits.values()],
            "lfs_objects": sorted(self.lfs_objects),
        }

    @classmethod
    def from_json(cls, raw: Mapping) -> Repo:
        commits = {commit["oid"]: Commit.from_json(commit) for commit in raw["commits"]}
        return cls(
            raw["repo_id"],
            raw["private"],
            raw["created_at"],
            dict(raw["branches"]),
            commits,
            set(raw["lfs_objects"]),
        )


@dataclass(frozen=True)
class AddRegular:
    """Commit operation: a small file whose content travels inside the commit."""

    path: str
    content: bytes


@dataclass(frozen=True)
class AddLfs:
    """Commit operation: a file whose content was uploaded to LFS storage beforehand."""

    path: str
    sha256: str
    size: int | None = None


@dataclass(frozen=True)
class Delete:
    """Commit operation: remove one file, or every file under a folder."""

    path: str
    folder: bool = False


Operation = AddRegular | AddLfs | Delete


class HubStore:
    """All repositories of one local hub, persisted under ``data_dir``.

    Layout: ``state.json`` (repos, commits, branches), ``objects/git/<blob id>`` (regular file
    contents), ``objects/lfs/<sha256>`` (LFS objects), ``tmp/`` (uploads in progress).
    """

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self.lock = threading.RLock()
        self.repos: dict[str, Repo] = {}
        self._prepare_folders()
        self._load()

    # -- disk layout -----------------------------------------------------------------------

    @property
    def _state_file(self) -> Path:
        return self.data_dir / "state.json"

    def _prepare_folders(self) -> None:
        for sub in ("objects/git", "objects/lfs", "tmp"):
            (self.data_dir / sub).mkdir(parents=True, exist_ok=True)

    def _load(self) -> None:
        if self._state_file.exists():
            raw = json.loads(self._state_file.read_text())
            self.repos = {repo["repo_id"]: Repo.from_json(repo) for repo in raw["repos"]}

    def _save(self) -> None:
        document = {"repos": [repo.to_json() for repo in self.repos.values()]}
        temporary = self._state_file.with_suffix(".json.tmp")
        temporary.write_text(json.dumps(document))
        os.replace(temporary, self._state_file)

    def reset(self) -> None:
        """Forget every repository and object (used between tests)."""
        with self.lock:
            self.repos.clear()
            shutil.rmtree(self.data_dir / "objects", ignore_errors=True)
            shutil.rmtree(self.data_dir / "tmp", ignore_errors=True)
            self._prepare_folders()
            self._save()

    def git_object_path(self, oid: str) -> Path:
        return self.data_dir / "objects" / "git" / oid

    def lfs_object_path(self, sha256: str) -> Path:
        return self.data_dir / "objects" / "lfs" / sha256

    def content_path(self, entry: FileEntry) -> Path:
        return (
            self.lfs_object_path(entry.sha256) if entry.sha256 else self.git_object_path(entry.oid)
        )

    def new_temporary_path(self) -> Path:
        return self.data_dir / "tmp" / secrets.token_hex(12)

    # -- repositories ----------------------------------------------------------------------

    def repo(self, repo_id: str) -> Repo:
        """The repository, or a ``RepoNotFound`` reply."""
        found = self.repos.get(repo_id)
        if found is None:
            raise repo_not_found(repo_id)
        return found

    def create_repo(self, repo_id: str, *, private: bool = False, author: str = "localhub") -> bool:
        """Create ``repo_id`` with the initial ``.gitattributes`` commit; False if it exists."""
        if not REPO_ID.match(repo_id):
            raise HubReply(400, f"Invalid repo name {repo_id!r}: expected 'namespace/name'")
        with self.lock:
            if repo_id in self.repos:
                return False
            repo = Repo(repo_id, private, time.time())
            self.repos[repo_id] = repo
            self._commit(
                repo,
                "main",
                [AddRegular(".gitattributes", DEFAULT_GITATTRIBUTES)],
                "initial commit",
                "",
                None,
                author,
            )
            return True

    def delete_repo(self, repo_id: str) -> None:
        with self.lock:
            self.repo(repo_id)
            del self.repos[repo_id]
            self._save()

    # -- objects ---------------------------------------------------------------------------

    def put_regular(self, content: bytes) -> FileEntry:
        oid = git_blob_oid(content)
        target = self.git_object_path(oid)
        if not target.exists():
            temporary = self.new_temporary_path()
            temporary.write_bytes(content)
            os.replace(temporary, target)
        return FileEntry("", len(content), oid)

    def adopt_lfs_object(self, repo_id: str, temporary: Path, sha256: str) -> None:
        """Move a fully received and verified upload into storage and grant it to the repo."""
        with self.lock:
            os.replace(temporary, self.lfs_object_path(sha256))
            self.repo(repo_id).lfs_objects.add(sha256)
            self._save()

    def repo_has_lfs_object(self, repo_id: str, sha256: str) -> bool:
        with self.lock:
            return (
                sha256 in self.repo(repo_id).lfs_objects and self.lfs_object_path(sha256).exists()
            )

    # -- commits ---------------------------------------------------------------------------

    def commit(
        self,
        repo_id: str,
        branch: str,
        operations: Iterable[Operation],
        summary: str,
        description: str = "",
        parent_commit: str | None = None,
        author: str = "localhub",
    ) -> Commit:
        """Apply ``operations`` on top of ``branch`` and move the branch to the new commit.

        A ``parent_commit`` that is not the branch head is refused with 412, as on the Hub.
        """
        with self.lock:
            repo = self.repo(repo_id)
            return self._commit(
                repo, branch, list(operations), summary, description, parent_commit, author
            )

    def _commit(
        self,
        repo: Repo,
        branch: str,
        operations: list[Operation],
        summary: str,
        description: str,
        parent_commit: str | None,
        author: str,
    ) -> Commit:
        head_oid = repo.branches.get(branch)
        if head_oid is None and repo.commits:
            raise HubReply(404, f"Invalid rev id: {branch}", "RevisionNotFound")
        if parent_commit is not None and parent_commit != head_oid:
            raise HubReply(
                412,
                f"A commit has happened since {parent_commit}: the head of {branch} is now "
                f"{head_oid}. Please refresh and try again.",
            )
        files = dict(repo.commits[head_oid].files) if head_oid else {}
        for operation in operations:
            self._apply(repo, files, operation, head_oid or "")
        created_at = time.time()
        oid = _commit_oid(files, head_oid, summary, author, created_at)
        commit = Commit(oid, head_oid, summary, description, author, created_at, files)
        repo.commits[oid] = commit
        repo.branches[branch] = oid
        self._save()
        return commit

    def _apply(
        self, repo: Repo, files: dict[str, FileEntry], operation: Operation, head: str
    ) -> None:
        if isinstance(operation, AddRegular):
            entry = self.put_regular(operation.content)
            files[operation.path] = FileEntry(operation.path, entry.size, entry.oid)
        elif isinstance(operation, AddLfs):
            if operation.sha256 not in repo.lfs_objects:
                raise HubReply(
                    422,
                    f"LFS object {operation.sha256} for {operation.path} was never uploaded "
                    f"to {repo.repo_id}",
                )
            size = self.lfs_object_path(operation.sha256).stat().st_size
            if operation.size is not None and operation.size != size:
                raise HubReply(
                    422, f"{operation.path}: size {operation.size} does not match stored {size}"
                )
            pointer_oid = git_blob_oid(lfs_pointer(operation.sha256, size))
            files[operation.path] = FileEntry(operation.path, size, pointer_oid, operation.sha256)
        elif operation.folder:
            prefix = operation.path.rstrip("/") + "/"
            doomed = [path for path in files if path.startswith(prefix)]
            if not doomed:
                raise entry_not_found(repo.repo_id, operation.path, head)
            for path in doomed:
                del files[path]
        else:
            if operation.path not in files:
                raise entry_not_found(repo.repo_id, operation.path, head)
            del files[operation.path]

    # -- seeding ---------------------------------------------------------------------------

    def commit_folder(
        self,
        repo_id: str,
        folder: Path,
        summary: str = "Upload folder",
        *,
        private: bool = False,
        branch: str = "main",
    ) -> Commit:
        """Commit every file under ``folder`` straight into storage (no HTTP involved)."""
        folder = Path(folder)
        files = {
            path.relative_to(folder).as_posix(): path
            for path in sorted(folder.rglob("*"))
            if path.is_file()
        }
        return self.commit_files(repo_id, files, summary, private=private, branch=branch)

    def commit_files(
        self,
        repo_id: str,
        files: Mapping[str, bytes | Path],
        summary: str = "Upload files",
        *,
        private: bool = False,
        branch: str = "main",
    ) -> Commit:
        """Commit files (contents or local paths) straight into storage; creates the repo.

        Files the Hub would keep in LFS go to LFS storage, copied while their SHA-256 is
        computed (one read pass); the others become regular git blobs.
        """
        self.create_repo(repo_id, private=private)
        operations: list[Operation] = []
        for relative, source in files.items():
            size = len(source) if isinstance(source, bytes) else Path(source).stat().st_size
            if not stored_in_lfs(relative, size):
                content = source if isinstance(source, bytes) else Path(source).read_bytes()
                operations.append(AddRegular(relative, content))
                continue
            sha256 = self._copy_into_lfs(source)
            with self.lock:
                self.repo(repo_id).lfs_objects.add(sha256)
            operations.append(AddLfs(relative, sha256, size))
        return self.commit(repo_id, branch, operations, summary)

    def _copy_into_lfs(self, source: bytes | Path) -> str:
        temporary = self.new_temporary_path()
        if isinstance(source, bytes):
            sha256 = hashlib.sha256(source).hexdigest()
            temporary.write_bytes(source)
        else:
            digest = hashlib.sha256()
            with open(source, "rb") as reader, open(temporary, "wb") as writer:
                while chunk := reader.read(HASH_CHUNK):
                    digest.update(chunk)
                    writer.write(chunk)
            sha256 = digest.hexdigest()
        os.replace(temporary, self.lfs_object_path(sha256))
        return sha256


def _commit_oid(
    files: Mapping[str, FileEntry], parent: str | None, summary: str, author: str, when: float
) -> str:
    """A git-like commit id: SHA-1 over the tree, the parent, the author, the time and message."""
    digest = hashlib.sha1()
    for path in sorted(files):
        digest.update(f"{files[path].oid} {path}\n".encode())
    digest.update(f"parent {parent}\nauthor {author} {when!r}\n\n{summary}".encode())
    return digest.hexdigest()
