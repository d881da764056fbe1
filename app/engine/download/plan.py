"""Which files a download fetches, pinned to one commit, with the sizes and ids to verify them.

The commit is pinned first (``model_info(...).sha``) and every file URL uses it, so a branch that
moves during a long download cannot mix two versions. The tree listing gives each file's size,
its git blob id and, for LFS files, the SHA-256 — the same ids the Hugging Face cache names its
blobs by.
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

from app.engine.download.request import DownloadRequest
from app.engine.errors import DownloadError


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


@dataclass(frozen=True)
class DownloadPlan:
    repo_id: str
    revision: str
    commit: str
    files: tuple[RemoteFile, ...]

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
    if commit is None:
        raise DownloadError(f"{where} did not report a commit for {request.revision!r}")
    by_path = {file.path: file for file in files}
    chosen = select(sorted(by_path), request.include)
    if not chosen:
        raise DownloadError(
            f"no file of {where} matches {', '.join(request.include)}; it has "
            f"{', '.join(sorted(by_path)[:8]) or 'no files'}"
        )
    return DownloadPlan(
        repo_id=request.repo_id,
        revision=request.revision,
        commit=commit,
        files=tuple(
            RemoteFile(
                path=path,
                size=by_path[path].size,
                git_oid=by_path[path].blob_id,
                sha256=by_path[path].lfs.sha256 if by_path[path].lfs else None,
            )
            for path in chosen
        ),
    )
