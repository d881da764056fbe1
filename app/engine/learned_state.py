"""Small JSON files the app learns into (the adaptive depth's timings, measured plain speeds):
one versioned document holding one mapping, written atomically, ignored when unusable.

What is learnt belongs to a model on a machine and only ever speeds things up or labels them, so
a file that cannot be read, parsed or is of another version is ignored with a log line (the
next save replaces it), and a failed save is a log line too: nothing here ever stops a reply.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def read_section(path: Path, version: int, section: str, what: str) -> dict[str, Any]:
    """The ``section`` mapping of the version-``version`` document at ``path`` ({} when there
    is none or it is unusable; ``what`` names the file's content in the log line)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        log.warning("ignoring %s (cannot read it: %s)", path, exc)
        return {}
    try:
        document: Any = json.loads(text)
    except ValueError as exc:
        log.warning("ignoring %s (not valid JSON: %s); %s starts afresh", path, exc, what)
        return {}
    if (
        not isinstance(document, dict)
        or document.get("version") != version
        or not isinstance(entries := document.get(section), dict)
    ):
        log.warning("ignoring %s (not a version-%d %s file); it starts afresh", path, version, what)
        return {}
    return entries


def write_section(path: Path, version: int, section: str, entries: dict[str, Any]) -> None:
    """Write the document to a temporary name beside ``path``, then rename it over ``path``."""
    document = {"version": version, section: entries}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(
            prefix=f".{path.name}.", suffix=".tmp", dir=path.parent
        )
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                json.dump(document, file)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as exc:
        log.warning("could not save %s: %s", path, exc)


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one)."""
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            cpu = next((line for line in cpuinfo if line.startswith("model name")), cpu)
    except OSError:
        pass
    return cpu.strip()
