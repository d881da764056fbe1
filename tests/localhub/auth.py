"""Who is calling the local hub, and what they may write.

Why: publishing must fail early and clearly on a bad or read-only token and on a namespace the
user cannot write to, so the local hub enforces the Hub's rules: no token may read public repos,
a bad token is a 401 everywhere, writes need a write token whose user or orgs own the namespace.
By default any token is accepted as the configured user (handy for manual trials); ``token``
makes one token the only valid one.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.localhub.errors import HubReply

INVALID_CREDENTIALS = "Invalid credentials in Authorization header"


@dataclass(frozen=True)
class Identity:
    name: str
    orgs: tuple[str, ...]
    role: str  # "write" or "read"

    def owns(self, namespace: str) -> bool:
        return namespace == self.name or namespace in self.orgs

    def can_write(self, namespace: str) -> bool:
        return self.role == "write" and self.owns(namespace)


@dataclass(frozen=True)
class TokenPolicy:
    user: str
    orgs: tuple[str, ...] = ()
    token: str | None = None  # the only valid write token; None accepts any token
    read_only_tokens: tuple[str, ...] = ()

    def identify(self, authorization: str | None) -> Identity | None:
        """The caller's identity, None when anonymous; a 401 reply for a token that is not valid."""
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise HubReply(401, INVALID_CREDENTIALS)
        if token in self.read_only_tokens:
            return Identity(self.user, self.orgs, "read")
        if self.token is not None and token != self.token:
            raise HubReply(401, INVALID_CREDENTIALS)
        return Identity(self.user, self.orgs, "write")


def require_write(identity: Identity | None, namespace: str) -> Identity:
    """The identity if it may write to ``namespace``; the Hub's 401/403 otherwise."""
    if identity is None:
        raise HubReply(401, "You must be authenticated to write; pass a token")
    if identity.role != "write":
        raise HubReply(403, "Your token has read-only access; create a token with write access")
    if not identity.owns(namespace):
        raise HubReply(403, f"You don't have the rights to write to the {namespace} namespace")
    return identity
