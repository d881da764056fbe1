"""The settings of one ``serve`` run, the limits every request is held to, and the rule that keeps
a server off the network by default.

A server reachable from other machines hands out compute (and whatever the model knows) to anyone
who finds the port, so binding anything but a loopback address requires an API key. The limits
keep any one request or client from stopping the server for everyone (issue 34): each is refused
with a 400 naming it, before any work, so they are stated here and in docs/server-api.md.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from app.engine.errors import ServerError
from app.engine.runtime.speculative.depth_policy import DEFAULT_MTP_DEPTH
from app.engine.server.core.depth import DepthSetting, check_depth_setting
from app.engine.server.core.images import ImageRules

LOOPBACK_NAMES = frozenset({"localhost", "ip6-localhost"})
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
DEFAULT_QUEUE_SIZE = 16
DEFAULT_MAX_BODY_MIB = 8

MAX_TOOLS = 256
"""Tools one request may offer (OpenAI allows 128): a forced call over 10,000 tools took 7 s to
compile. Their schemas together are held to the grammar compiler's limits
(:data:`~app.engine.runtime.chat_format.schema_limits.MAX_SCHEMA_VALUES`)."""
MAX_STOP_STRINGS = 32
MAX_STOP_CHARACTERS = 512
"""Stop strings per request (OpenAI allows 4), and the length of each, which bound the text held
back while a reply streams and the work of watching for them."""
CHECK_SECONDS = 10.0
"""How long reading a request's JSON and checking its fields (schemas compiled, tools read) may
take on the server's checking threads before it is refused; within the limits above it takes well
under a second."""
READ_SECONDS = 30.0
"""How long a client may take to send one request, headers and body."""
MAX_CONNECTIONS = 256
MAX_CONNECTIONS_PER_CLIENT = 64
"""Open connections, in all and per client address (well under the usual 1,024 file
descriptors); past a cap the oldest connection still sending its request makes room."""


@dataclass(frozen=True)
class ServerConfig:
    """The settings of the whole server (each model's own facts are in its
    :class:`~app.engine.server.models.catalogue.ServableModel`).

    ``mtp_depth``: a request's depth unless it sends ``mtp_depth`` (``auto`` or 0–8).
    ``queue_size``: requests that may wait for one model before a 503.
    ``default_max_tokens``: for a request that sets none; None lets it fill the context.
    ``max_body_bytes``: larger request bodies get a 413. ``cors_origins``: web origins whose
    pages may call the server from a browser (none by default). ``images``: what a request's
    images may be (whether a model reads them at all is its loaded
    :attr:`~app.engine.runtime.core.backend.ModelInfo.reads_images`).
    ``allowed_hosts``: names besides the loopback ones a request's ``Host`` may give
    (:mod:`.request_guard`)."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    api_key: str | None = None
    mtp_depth: DepthSetting = DEFAULT_MTP_DEPTH
    queue_size: int = DEFAULT_QUEUE_SIZE
    default_max_tokens: int | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_MIB * 2**20
    cors_origins: tuple[str, ...] = ()
    images: ImageRules = field(default_factory=ImageRules)
    allowed_hosts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_bind(self.host, self.api_key)
        check_depth_setting(self.mtp_depth)
        if not 0 <= self.port <= 65535:
            raise ServerError(f"port {self.port} is invalid: use 1–65535 (0 picks a free one)")
        if self.queue_size < 1:
            raise ServerError(f"queue size {self.queue_size} is invalid: use 1 or more")
        if self.default_max_tokens is not None and self.default_max_tokens < 1:
            raise ServerError(f"--max-tokens {self.default_max_tokens} is invalid: use 1 or more")
        if self.max_body_bytes < 2**20:
            raise ServerError("--max-body-mib must be 1 or more")
        if self.images.max_images < 0:
            raise ServerError(f"--max-images {self.images.max_images} is invalid: use 0 or more")

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    def __repr__(self) -> str:  # never show the key
        key = "set" if self.api_key else "none"
        return f"ServerConfig({self.host}:{self.port}, api key {key})"


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, api_key: str | None) -> None:
    """Refuse a non-loopback ``host`` without an API key, saying why and how to fix it."""
    if not is_loopback(host) and not api_key:
        raise ServerError(
            f"--host {host} would expose the server to other machines, which requires an API key: "
            "pass --api-key KEY (clients send it as 'Authorization: Bearer KEY'), or keep the "
            f"default --host {DEFAULT_HOST}"
        )
