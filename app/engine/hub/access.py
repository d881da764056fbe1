"""The write pre-flight of a publish: which token, which account, and may it write the sidecar repo.

Why first: a publish downloads and converts hundreds of MB before it uploads anything, so a
missing, rejected or read-only token, or a namespace the account cannot write to, must stop it
before any heavy work — with a message that says how to fix it. The token comes from the caller,
else ``HF_TOKEN``, else the standard ``$HF_HOME/token`` file that ``hf auth login`` writes (the
resolution of ``huggingface_hub.get_token``); it is never printed or logged.
"""

from __future__ import annotations

from dataclasses import dataclass

from huggingface_hub import HfApi, get_token
from huggingface_hub.errors import RepositoryNotFoundError

from app.engine.errors import PublishError
from app.engine.hub.failures import hub_error, status_of


@dataclass(frozen=True)
class HubAccount:
    """Who the token belongs to and what it may do."""

    name: str
    orgs: tuple[str, ...]
    role: str  # "write", "read", "fineGrained", ...
    sidecar_repo_exists: bool


def resolve_token(explicit: str | None = None) -> str:
    """The token to publish with: ``explicit``, else ``HF_TOKEN``, else ``$HF_HOME/token``."""
    token = (explicit or "").strip() or get_token()
    if not token:
        raise PublishError(
            "no Hub token found: set HF_TOKEN, or sign in with `hf auth login` (or in the app's "
            "Settings); publishing needs a token with write access"
        )
    return token


def check_write_access(api: HfApi, repo_id: str) -> HubAccount:
    """Confirm the token is valid and may write ``repo_id`` (which may not exist yet)."""
    endpoint = api.endpoint
    try:
        info = api.whoami()
    except Exception as exc:
        raise hub_error(exc, f"checking the Hub token with {endpoint}", endpoint) from None
    name = str(info.get("name", ""))
    role = str(((info.get("auth") or {}).get("accessToken") or {}).get("role", ""))
    orgs = {str(o.get("name")): str(o.get("roleInOrg", "")) for o in info.get("orgs") or []}
    if role == "read":
        raise PublishError(
            f"the Hub token of {name} is read-only; create a token with write access at "
            f"{endpoint}/settings/tokens and set HF_TOKEN (or run `hf auth login`)"
        )
    namespace = repo_id.split("/", 1)[0]
    if namespace != name and (namespace not in orgs or orgs[namespace] == "read"):
        raise PublishError(
            f"{name} cannot write to the {namespace} namespace of sidecar repo {repo_id}: use a "
            f"token of {namespace} (or of a member with write rights), or change "
            "mtp_sidecar_repo in the catalog"
        )
    try:
        api.auth_check(repo_id, write=True)
    except RepositoryNotFoundError:
        return HubAccount(name, tuple(orgs), role, sidecar_repo_exists=False)
    except Exception as exc:
        if status_of(exc) == 403:
            raise PublishError(
                f"{name} has no write access to {repo_id}; ask its owner for write rights or "
                "use a token with write access to it"
            ) from None
        raise hub_error(exc, f"checking write access to {repo_id}", endpoint) from None
    return HubAccount(name, tuple(orgs), role, sidecar_repo_exists=True)
