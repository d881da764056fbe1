"""What the adaptive depth learned, kept across restarts per model file and machine.

Cycle costs and acceptance belong to a model on a machine (and a llama.cpp build and thread
count), not to one run of the app, so the adaptive depth's state is written to a small JSON file
in the app's data folder after each request and read when a model is loaded again: a new
session starts at the depth that was fastest last time instead of repeating the opening trials.

- The key is the model file's identity (size and a hash of its first MiB, so a renamed copy
  keeps what was learned and a re-downloaded different file does not inherit it) plus the
  backend's performance fingerprint (CPU, build, threads) and the maximum depth.
- The file is written to a temporary name and renamed, so a crash never leaves half a file.
- A file that cannot be read or parsed is ignored with a log line: learning starts afresh and
  the next save replaces it. Nothing here ever stops a reply.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from app.engine.learned_state import read_section, write_section

STORE_FILE_NAME = "adaptive-depth.json"
STORE_VERSION = 1
SECTION = "policies"
_IDENTITY_BYTES = 1 << 20


def model_identity(path: Path) -> str:
    """The model file's size and the SHA-256 of its first MiB (cheap, rename-proof)."""
    with open(path, "rb") as file:
        head = file.read(_IDENTITY_BYTES)
    return f"{os.path.getsize(path)}:{hashlib.sha256(head).hexdigest()[:32]}"


class DepthMemory:
    """One JSON file mapping keys to an adaptive depth's saved state."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def in_app_data(cls) -> DepthMemory:
        from app.engine.settings import app_dirs

        return cls(app_dirs().data / STORE_FILE_NAME)

    def load(self, key: str) -> dict[str, Any] | None:
        """The state saved under ``key``, or None (nothing saved, or the file is unusable)."""
        state = self._read().get(key)
        return state if isinstance(state, dict) else None

    def save(self, key: str, state: dict[str, Any]) -> None:
        """Store ``state`` under ``key``, keeping the other keys; atomic replace."""
        entries = self._read()
        entries[key] = state
        write_section(self.path, STORE_VERSION, SECTION, entries)

    def _read(self) -> dict[str, Any]:
        return read_section(self.path, STORE_VERSION, SECTION, "adaptive depth")
