"""Turning ``huggingface_hub`` and network exceptions into one :class:`HubError` a user acts on.

Why: the client raises a zoo of types (httpx2 transport errors, ``RepositoryNotFoundError``,
``GatedRepoError``, bare ``HfHubHTTPError`` with a status). A user needs one line that says which
repo or file failed, on which Hub, and what to do — and a network or auth failure must never be
mistaken for "this model has no MTP heads". Messages never contain a token.
"""

from __future__ import annotations

import httpx2
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from app.engine.errors import HubError

TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


def status_of(exc: BaseException) -> int | None:
    """The HTTP status behind a client exception, if there is one."""
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: a network hiccup, a timeout, or a 408/429/5xx answer."""
    if isinstance(exc, httpx2.TransportError):
        return True
    return status_of(exc) in TRANSIENT_STATUSES


def hub_error(exc: BaseException, what: str, endpoint: str) -> HubError:
    """A :class:`HubError` for ``exc`` raised while doing ``what`` (e.g. "reading Qwen/X")."""
    return HubError(f"{what} failed: {_reason(exc, endpoint)}")


def _reason(exc: BaseException, endpoint: str) -> str:
    if isinstance(exc, GatedRepoError):
        return (
            "the repository is gated; accept its terms on its Hub page while signed in with the "
            "account of your token, then retry"
        )
    if isinstance(exc, RepositoryNotFoundError):
        return (
            f"the repository does not exist on {endpoint}, or it is private and your token cannot "
            "read it; check the repo id in the catalog and the token (HF_TOKEN / hf auth login)"
        )
    if isinstance(exc, RevisionNotFoundError):
        return "that revision does not exist in the repository; check the revision or branch"
    if isinstance(exc, RemoteEntryNotFoundError):
        return "the file does not exist at that revision"
    status = status_of(exc)
    if status == 401:
        return (
            f"{endpoint} rejected the token (401); create a new token and set HF_TOKEN or run "
            "`hf auth login`"
        )
    if status == 403:
        return "permission denied (403); use a token with write access to that namespace"
    if isinstance(exc, HfHubHTTPError) and status is not None:
        return f"the Hub answered HTTP {status}; retry later, or check {endpoint} status"
    if isinstance(exc, (httpx2.ConnectError, httpx2.ConnectTimeout)):
        return (
            f"could not reach {endpoint} ({type(exc).__name__}: {exc}); check the network, "
            "proxy settings and HF_ENDPOINT, then retry"
        )
    if isinstance(exc, httpx2.TransportError):
        return (
            f"the connection to the Hub broke ({type(exc).__name__}: {exc}); check the network "
            "and retry"
        )
    return f"{type(exc).__name__}: {exc}"
