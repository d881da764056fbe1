"""Is each sidecar published? Asked of the Hub in the background, remembered between starts.

The browser must never wait on the network (the app opens offline), so a status is whatever was
last learnt — from this session or the cache file — until a background check answers. Offline,
a check fails quietly into "Hub unreachable" with the reason in the tooltip.
"""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from PySide6.QtCore import QObject, Signal

SIDECAR_FILE = "mtp.safetensors"
RECHECK_AFTER_SECONDS = 600


class Published(StrEnum):
    UNKNOWN = "unknown"
    CHECKING = "checking"
    YES = "yes"
    NO = "no"
    UNREACHABLE = "unreachable"


@dataclass(frozen=True)
class SidecarCheck:
    published: Published
    checked_at: float = 0.0
    reason: str = ""


def check_published(endpoint: str, repo_id: str) -> SidecarCheck:
    """Ask ``endpoint`` whether ``repo_id`` holds ``mtp.safetensors`` (runs in a worker thread)."""
    from huggingface_hub import HfApi

    try:
        exists = HfApi(endpoint=endpoint).file_exists(repo_id, SIDECAR_FILE)
    except Exception as exc:  # any failure means "could not tell", shown with its reason
        return SidecarCheck(Published.UNREACHABLE, time.time(), f"{type(exc).__name__}: {exc}")
    return SidecarCheck(Published.YES if exists else Published.NO, time.time())


class SidecarStatusBook(QObject):
    """Cached answers per (endpoint, repo); ``changed(repo)`` fires on the GUI thread."""

    changed = Signal(str)
    _answered = Signal(str, str, object)  # endpoint, repo, SidecarCheck — from worker threads

    def __init__(self, cache_file: Path, endpoint: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._cache_file = cache_file
        self._endpoint = endpoint
        self._lock = threading.Lock()
        self._checks: dict[str, dict[str, SidecarCheck]] = self._read_cache()
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="sidecar-status")
        self._answered.connect(self._store)

    @property
    def endpoint(self) -> str:
        return self._endpoint

    def set_endpoint(self, endpoint: str) -> None:
        self._endpoint = endpoint

    def status(self, repo_id: str) -> SidecarCheck:
        return self._checks.get(self._endpoint, {}).get(repo_id, SidecarCheck(Published.UNKNOWN))

    def refresh(self, repo_ids: list[str], force: bool = False) -> None:
        """Check repos whose answer is missing or stale (all of them with ``force``)."""
        now = time.time()
        for repo_id in dict.fromkeys(repo_ids):
            current = self.status(repo_id)
            if current.published is Published.CHECKING:
                continue
            fresh = now - current.checked_at < RECHECK_AFTER_SECONDS
            if fresh and not force and current.published is not Published.UNKNOWN:
                continue
            self._set(self._endpoint, repo_id, SidecarCheck(Published.CHECKING, current.checked_at))
            self.changed.emit(repo_id)
            endpoint = self._endpoint
            self._pool.submit(self._work, endpoint, repo_id)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _work(self, endpoint: str, repo_id: str) -> None:
        self._answered.emit(endpoint, repo_id, check_published(endpoint, repo_id))

    def _store(self, endpoint: str, repo_id: str, check: SidecarCheck) -> None:
        self._set(endpoint, repo_id, check)
        self._write_cache()
        if endpoint == self._endpoint:
            self.changed.emit(repo_id)

    def _set(self, endpoint: str, repo_id: str, check: SidecarCheck) -> None:
        with self._lock:
            self._checks.setdefault(endpoint, {})[repo_id] = check

    def _read_cache(self) -> dict[str, dict[str, SidecarCheck]]:
        try:
            raw = json.loads(self._cache_file.read_text(encoding="utf-8"))
            return {
                endpoint: {
                    repo: SidecarCheck(Published(value["published"]), float(value["checked_at"]))
                    for repo, value in repos.items()
                    if value.get("published") in (Published.YES, Published.NO)
                }
                for endpoint, repos in raw.items()
            }
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}  # no cache or an unreadable one: everything gets checked again

    def _write_cache(self) -> None:
        with self._lock:
            document = {
                endpoint: {
                    repo: {"published": check.published.value, "checked_at": check.checked_at}
                    for repo, check in repos.items()
                    if check.published in (Published.YES, Published.NO)
                }
                for endpoint, repos in self._checks.items()
            }
        self._cache_file.parent.mkdir(parents=True, exist_ok=True)
        temporary = self._cache_file.with_name(f".{self._cache_file.name}.tmp")
        temporary.write_text(json.dumps(document), encoding="utf-8")
        os.replace(temporary, self._cache_file)
