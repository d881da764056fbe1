"""Web pages cannot drive a server on this machine: requests must name an allowed host and send
JSON.

Why: any web page the user opens can POST to ``http://127.0.0.1:8080`` with ``Content-Type:
text/plain`` (a "simple" request, sent without asking the server first), and a page on a domain
the attacker re-points at 127.0.0.1 (DNS rebinding) can even read the replies. Two checks close
both: the ``Host`` header must be a loopback name (``localhost``, ``127.0.0.1``, ``[::1]``), the
``--host`` the server was given, or one allowed with ``--allow-host`` — a rebinding page's
requests carry its own domain — and a request with a body must say ``Content-Type:
application/json``, which a browser sends cross-site only after a CORS preflight (answered only for
``--cors`` origins). A server bound to a non-loopback address needs an API key anyway, which no
web page has, so any ``Host`` is accepted there.
"""

from __future__ import annotations

from starlette.requests import Request

from app.engine.server.core.api_errors import ApiError
from app.engine.server.core.config import ServerConfig, is_loopback
from app.engine.server.core.echo import echo

JSON_MEDIA_TYPE = "application/json"


def check_host(request: Request, config: ServerConfig) -> None:
    """403 unless the request's ``Host`` is one ``config`` allows (see the module docstring)."""
    if not is_loopback(config.host):
        return
    given = request.headers.get("host", "")
    name = host_name(given)
    allowed = {config.host.lower(), *(host_name(host) for host in config.allowed_hosts)}
    if is_loopback(name) or name in allowed:
        return
    raise ApiError(
        403,
        f"Host {echo(given)} is not allowed: this server answers requests for localhost only, "
        "so that web pages cannot reach it by re-pointing a domain at this machine. Use "
        f"http://localhost:{_local_port(request)} (or start the server with --allow-host NAME).",
        type_="permission_error",
        code="host_not_allowed",
    )


def _local_port(request: Request) -> str:
    server = request.scope.get("server")
    return str(server[1]) if server else "PORT"


def host_name(header: str) -> str:
    """The name in a ``Host`` header, without its port, brackets or final dot, in lower case."""
    header = header.strip().lower()
    if header.startswith("["):  # [::1]:8080
        return header[1:].partition("]")[0]
    if header.count(":") == 1:
        header = header.partition(":")[0]
    return header.removesuffix(".")


def check_json_content_type(request: Request) -> None:
    """415 unless the request says its body is JSON."""
    given = request.headers.get("content-type", "")
    media_type = given.partition(";")[0].strip().lower()
    if media_type == JSON_MEDIA_TYPE:
        return
    raise ApiError(
        415,
        f"Content-Type {echo(given or '(none)')} is not accepted: send the body as JSON with "
        "'Content-Type: application/json' (curl: -H 'Content-Type: application/json').",
        code="unsupported_media_type",
    )
