"""The one way a test picks a free loopback port (for a server it starts, or a hub it binds).

The kernel hands out an unused port for a socket bound to port 0; the socket is closed before
the port is returned, so a server started right after can bind it. Where a server can report
the port it bound itself (``mtp-studio serve --port 0``), prefer that: no other process can take
the port in between.
"""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])
