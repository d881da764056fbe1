"""The one error type of the local hub: an HTTP status plus the Hub's ``X-Error-Code``.

Why: the real client turns ``X-Error-Code`` (``RepoNotFound``, ``RevisionNotFound``,
``EntryNotFound``…) into specific exception types, so every refusal of the local hub must carry
the same code the Hub would send, wherever in the server it is decided.
"""

from __future__ import annotations


class HubReply(Exception):
    """Stop handling a request and answer ``status`` with this code and message."""

    def __init__(
        self,
        status: int,
        message: str,
        code: str = "",
        headers: dict[str, str] | None = None,
        body: dict | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = headers or {}
        self.body = body


def repo_not_found(repo_id: str) -> HubReply:
    return HubReply(404, f"Repository {repo_id} not found", "RepoNotFound")


def revision_not_found(repo_id: str, revision: str) -> HubReply:
    return HubReply(404, f"Invalid rev id: {revision} for {repo_id}", "RevisionNotFound")


def entry_not_found(repo_id: str, path: str, commit: str) -> HubReply:
    return HubReply(
        404,
        f"Entry not found: {path} in {repo_id}",
        "EntryNotFound",
        headers={"X-Repo-Commit": commit},
    )
