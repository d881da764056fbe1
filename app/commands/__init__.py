"""CLI subcommands, one module per area.

Each module exposes ``register(subparsers)`` which adds its subcommand(s) and sets ``func`` on the
parser to a callable ``(args) -> int``. ``app.cli`` wires them in the order listed here.
"""

COMMAND_MODULES: tuple[str, ...] = (
    "catalog",
    "publish",
    "scratch",
    "extract",
    "graft",
    "download",
    "bench",
    "chat",
    "serve",
)
