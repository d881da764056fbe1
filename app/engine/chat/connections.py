"""Saved connections to OpenAI-compatible servers, for the chat window's model picker.

A connection is a name, the server's base URL, an optional model and an optional API key. Keys
are secrets, so they are kept the way the Hub token is: never in settings.json, never logged,
shown only masked — in their own file (``connections.json`` beside the settings) that only the
user can read (``mkstemp`` creates it with mode 0600, then it is renamed into place, so a crash
never leaves half a file).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from app.engine.errors import RemoteError
from app.engine.settings import mask_token

CONNECTIONS_FILE_NAME = "connections.json"
_FORMAT_VERSION = 1


@dataclass(frozen=True)
class Connection:
    """One saved server. ``model`` None: the server's first model; ``api_key`` None: no key."""

    name: str
    url: str
    model: str | None = None
    api_key: str | None = None

    @property
    def masked_key(self) -> str:
        """The key as it may be shown: ``…`` and its last four characters, or "no key"."""
        return mask_token(self.api_key) if self.api_key else "no key"

    def __repr__(self) -> str:  # a repr that lands in a log or traceback must not carry the key
        return (
            f"Connection(name={self.name!r}, url={self.url!r}, model={self.model!r}, "
            f"api_key={self.masked_key!r})"
        )


def validated(name: str, url: str, model: str, api_key: str) -> Connection:
    """A connection from what the user typed (trimmed), or a :class:`RemoteError` saying why not."""
    name, url, model, api_key = (
        name.strip(),
        url.strip().rstrip("/"),
        model.strip(),
        api_key.strip(),
    )
    if not url.startswith(("http://", "https://")):
        raise RemoteError(f"the URL {url!r} is not an http(s) URL: use e.g. http://host:8000/v1")
    return Connection(name or url, url, model or None, api_key or None)


class ConnectionStore:
    """The saved connections in ``path`` (a missing file: none saved yet)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def load(self) -> list[Connection]:
        if not self.path.is_file():
            return []
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
            return [_from_json(item) for item in raw["connections"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise RemoteError(
                f"the saved connections in {self.path} cannot be read ({type(exc).__name__}); "
                "delete the file to start again (the connections must then be added again)"
            ) from None

    def add(self, connection: Connection) -> list[Connection]:
        """Save ``connection``, replacing a saved one of the same name."""
        kept = [saved for saved in self.load() if saved.name != connection.name]
        return self._save([*kept, connection])

    def remove(self, name: str) -> list[Connection]:
        return self._save([saved for saved in self.load() if saved.name != name])

    def _save(self, connections: list[Connection]) -> list[Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        document = {
            "version": _FORMAT_VERSION,
            "connections": [asdict(connection) for connection in connections],
        }
        descriptor, temporary = tempfile.mkstemp(prefix=".connections-", dir=self.path.parent)
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                json.dump(document, handle, indent=2)
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return connections


def _from_json(item: dict[str, Any]) -> Connection:
    return Connection(str(item["name"]), str(item["url"]), item.get("model"), item.get("api_key"))
