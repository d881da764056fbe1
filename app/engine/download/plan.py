"""Which files a download fetches, pinned to one commit, with the sizes and ids to verify them.

The commit is pinned first (``model_info(...).sha``) and every file URL uses it, so a branch that
moves during a long download cannot mix two versions. The tree listing gives each file's size,
its git blob id and, for LFS files, the SHA-256 — the same ids the Hugging Face cache names its
blobs by.

Every name and id in that listing comes from a server the user chose, so each is checked
(:mod:`app.engine.safepath`) before it can become a local path: an entry with an unsafe path, a
malformed content id or a nonsense size is set aside as *refused* — never fetched, never written —
and the job says so and fails once the safe files are in place.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

import httpx2
from huggingface_hub import HfApi
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.hf_api import RepoFile

from app.engine.download.quantisation import gguf_files
from app.engine.download.request import DownloadRequest
from app.engine.errors import DownloadError
from app.engine.safepath import (
    GIT_OID_LENGTH,
    SHA256_LENGTH,
    hex_id_problem,
    relative_path_problem,
)


@dataclass(frozen=True)
class RemoteFile:
    """One file of the pinned commit."""

    path: str
    size: int
    git_oid: str
    sha256: str | None  # set for LFS files

    @property
    def blob_name(self) -> str:
        """The name the Hugging Face cache stores the content under (its ETag)."""
        return self.sha256 or self.git_oid


SHOWN_NAME_CHARACTERS = 120


@dataclass(frozen=True)
class RefusedEntry:
    """A listed file that is not downloaded because its path, id or size is unsafe."""

    path: object
    """As the server sent it (shown with ``repr`` so control characters are visible)."""
    reason: str

    def describe(self) -> str:
        shown = repr(self.path)
        if len(shown) > SHOWN_NAME_CHARACTERS:
            shown = shown[:SHOWN_NAME_CHARACTERS] + "…"
        return f"{shown} ({self.reason})"


@dataclass(frozen=True)
class DownloadPlan:
    repo_id: str
    revision: str
    commit: str
    files: tuple[RemoteFile, ...]
    refused: tuple[RefusedEntry, ...] = ()

    @property
    def total_bytes(self) -> int:
        return sum(file.size for file in self.files)


def select(paths: list[str], include: tuple[str, ...]) -> list[str]:
    """Paths matching any glob in ``include`` (all of them when it is empty)."""
    if not include:
        return list(paths)
    return [path for path in paths if any(fnmatch.fnmatch(path, pattern) for pattern in include)]


def plan_download(request: DownloadRequest, token: str | None = None) -> DownloadPlan:
    """Pin the commit and list the files to fetch; errors say what to check."""
    api = HfApi(endpoint=request.endpoint, token=token)
    where = f"{request.repo_id} on {request.endpoint}"
    try:
        commit = api.model_info(request.repo_id, revision=request.revision).sha
        tree = api.list_repo_tree(request.repo_id, recursive=True, revision=commit)
        files = [item for item in tree if isinstance(item, RepoFile)]
    except GatedRepoError:
        raise DownloadError(
            f"{where} is gated; accept its terms on the model page, then sign in (Settings)"
        ) from None
    except RepositoryNotFoundError:
        raise DownloadError(
            f"{where} does not exist or needs a token; check the name, or sign in (Settings) "
            "if it is private"
        ) from None
    except RevisionNotFoundError:
        raise DownloadError(
            f"revision {request.revision!r} does not exist in {where}; use a branch, tag or "
            "commit that exists (e.g. main)"
        ) from None
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        raise DownloadError(
            f"{request.endpoint} refused to list {request.repo_id} (HTTP {status}); "
            "try again later, or check the Hub endpoint in Settings"
        ) from None
    except httpx2.TransportError as exc:
        raise DownloadError(
            f"cannot reach {request.endpoint} ({type(exc).__name__}); check the network or "
            "the Hub endpoint in Settings"
        ) from None
    except (KeyError, TypeError, ValueError) as exc:
        raise DownloadError(
            f"{request.endpoint} sent a malformed file listing for {request.repo_id} "
            f"({type(exc).__name__}: {exc}); check the Hub endpoint in Settings"
        ) from None
    if commit is None:
        raise DownloadError(f"{where} did not report a commit for {request.revision!r}")
    if (problem := hex_id_problem(commit, GIT_OID_LENGTH)) is not None:
        raise DownloadError(
            f"{where} reported commit {commit!r} for {request.revision!r}, which is refused: "
            f"{problem}; check the Hub endpoint in Settings"
        )
    candidates = [_checked_entry(item) for item in files]
    by_path = {file.path: file for file in candidates if isinstance(file, RemoteFile)}
    refused = [entry for entry in candidates if isinstance(entry, RefusedEntry)]
    if request.include:
        refused = [
            entry
            for entry in refused
            if not isinstance(entry.path, str) or select([entry.path], request.include)
        ]
    if request.quant:
        chosen = _quantisation_files(request, by_path, refused)
    else:
        chosen = select(sorted(by_path), request.include)
    if not chosen and not refused:
        raise DownloadError(
            f"no file of {where} matches {', '.join(request.include)}; it has "
            f"{', '.join(sorted(by_path)[:8]) or 'no files'}"
        )
    return DownloadPlan(
        repo_id=request.repo_id,
        revision=request.revision,
        commit=commit,
        files=tuple(by_path[path] for path in chosen),
        refused=tuple(refused),
    )


def _quantisation_files(
    request: DownloadRequest, by_path: dict[str, RemoteFile], refused: list[RefusedEntry]
) -> list[str]:
    """The files of ``request.quant``; when it is missing, the error also names a refused entry
    (a name too long, say), which may be why."""
    sizes = {path: file.size for path, file in by_path.items()}
    try:
        return list(gguf_files(sizes).files_for(request.quant, request.repo_id, request.projector))
    except DownloadError as exc:
        if not refused:
            raise
        raise DownloadError(
            f"{exc}; the listing also had {len(refused)} file(s) refused: {refused[0].describe()}"
        ) from None


def _checked_entry(item: RepoFile) -> RemoteFile | RefusedEntry:
    """The listed file as a :class:`RemoteFile`, or why it is refused."""
    sha256 = item.lfs.sha256 if item.lfs else None
    problem = _entry_problem(item, sha256)
    if problem is not None:
        return RefusedEntry(item.path, problem)
    return RemoteFile(path=item.path, size=item.size, git_oid=item.blob_id, sha256=sha256)


def _entry_problem(item: RepoFile, sha256: str | None) -> str | None:
    if (problem := relative_path_problem(item.path)) is not None:
        return problem
    if (problem := hex_id_problem(item.blob_id, GIT_OID_LENGTH)) is not None:
        return f"its git blob id {item.blob_id!r} is refused: {problem}"
    if sha256 is not None and (problem := hex_id_problem(sha256, SHA256_LENGTH)) is not None:
        return f"its sha256 {sha256!r} is refused: {problem}"
    if not isinstance(item.size, int) or isinstance(item.size, bool) or item.size < 0:
        return f"its size {item.size!r} is not a byte count"
    return None
