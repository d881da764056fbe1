"""What one search reads from the Hub besides listings, each thing once per search.

Model shapes from config.json files (each repo read at most once), the first kilobytes of GGUF
files (whether the MTP head is inside, and the architecture: a trunk, a head file or a separate
drafter), published sidecars for base models, and separate drafter repos (the catalog's, or one
named ``<base>-assistant…``). Reads run from several threads at once (search describes a few
repos in parallel), so every cache is guarded by a lock.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import httpx2
from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError

from app.engine.bounded_json import parse_bounded_json
from app.engine.chat.memory import ModelShape
from app.engine.chat.model_files import config_shape
from app.engine.hub.drafter_lookup import (
    CATALOG,
    DrafterHit,
    describe_drafter_repo,
    find_hub_drafter,
)
from app.engine.hub.gguf_peek import mtp_blocks_in, remote_metadata
from app.engine.hub.sidecar_lookup import find_hub_sidecar
from app.engine.hub.small_file import fetch_small_file

HUB_FAILURES = (HfHubHTTPError, httpx2.HTTPError, OSError)


class HubFacts:
    """The Hub reads of one search, cached (see the module docstring)."""

    def __init__(self, endpoint: str, token: str | None) -> None:
        self._endpoint = endpoint
        self._token = token
        self._configs: dict[str, dict[str, Any] | None] = {}
        self._sidecars: dict[tuple[str, ...], str | None] = {}
        self._metadata: dict[tuple[str, str, str], dict[str, object] | None] = {}
        self._drafters: dict[tuple[object, ...], DrafterHit | None] = {}
        self._lock = threading.Lock()
        self._sidecar_lock = threading.Lock()
        self._drafter_lock = threading.Lock()

    def _api(self) -> HfApi:
        return HfApi(endpoint=self._endpoint, token=self._token)

    def hub_sidecar(self, bases: tuple[str, ...], repo_id: str) -> str | None:
        """A sidecar published on the Hub for ``bases`` (by card, then by name), or None. A
        failed lookup counts as none found: the repo is still listed, only without a sidecar."""
        key = bases or (repo_id,)
        with self._sidecar_lock:
            if key not in self._sidecars:
                try:
                    self._sidecars[key] = find_hub_sidecar(self._api(), bases, repo_id)
                except HUB_FAILURES:
                    self._sidecars[key] = None
            return self._sidecars[key]

    def config(self, repo_id: str, listed_size: int | None = None) -> dict[str, Any] | None:
        """``repo_id``'s config.json (``listed_size`` as its listing says, when known), or None
        when it has no readable one."""
        with self._lock:
            if repo_id not in self._configs:
                self._configs[repo_id] = self._read_config(repo_id, listed_size)
            return self._configs[repo_id]

    def shape(
        self, own: str | None, bases: tuple[str, ...], own_size: int | None = None
    ) -> ModelShape | None:
        """The shape from the repo's own config.json (``own_size`` as listed), else its base
        models' (None: the fit is judged on file size alone and says so)."""
        for repo_id in (own, *bases):
            if repo_id is None:
                continue
            config = self.config(repo_id, own_size if repo_id == own else None)
            if config is None:
                continue
            text = config.get("text_config")
            shape = config_shape({**config, **(text if isinstance(text, dict) else {})})
            if shape.embedding_length:
                return shape
        return None

    def metadata(self, repo_id: str, commit: str, path: str) -> dict[str, object] | None:
        key = (repo_id, commit, path)
        with self._lock:
            if key in self._metadata:
                return self._metadata[key]
        found = remote_metadata(repo_id, commit, path, endpoint=self._endpoint, token=self._token)
        with self._lock:
            self._metadata[key] = found
        return found

    def mtp_blocks(self, repo_id: str, commit: str, path: str) -> int | None:
        metadata = self.metadata(repo_id, commit, path)
        return mtp_blocks_in(metadata) if metadata is not None else None

    def architecture(self, repo_id: str, commit: str, path: str) -> str | None:
        architecture = (self.metadata(repo_id, commit, path) or {}).get("general.architecture")
        return architecture if isinstance(architecture, str) else None

    def catalog_drafter(self, repo_id: str) -> DrafterHit | None:
        """The catalog's drafter repo as a drafter hit (None when it holds no drafter or
        cannot be read: the repo is then listed without one)."""
        return self._drafter_once(("catalog", repo_id), lambda: self._describe(repo_id))

    def hub_drafter(self, bases: tuple[str, ...], repo_id: str, gguf: bool) -> DrafterHit | None:
        """A drafter repo named ``<base>-assistant…`` on the Hub, in the hit's format."""
        return self._drafter_once(
            ("hub", bases or (repo_id,), gguf),
            lambda: find_hub_drafter(
                self._api(), bases, repo_id, gguf, self.architecture, self.config
            ),
        )

    def _describe(self, repo_id: str) -> DrafterHit | None:
        info = self._api().model_info(repo_id, files_metadata=True)
        return describe_drafter_repo(info, CATALOG, self.architecture, self.config)

    def _drafter_once(self, key: tuple[object, ...], look: Any) -> DrafterHit | None:
        with self._drafter_lock:
            if key not in self._drafters:
                try:
                    self._drafters[key] = look()
                except HUB_FAILURES:
                    self._drafters[key] = None
            return self._drafters[key]

    def _read_config(self, repo_id: str, listed_size: int | None) -> dict[str, Any] | None:
        """None when the repo has no readable config.json — missing, gated, larger than
        :data:`~.small_file.MAX_SMALL_FILE_BYTES` (a hostile Hub's 300 MB one is not fetched),
        not JSON or nested past the bounded parser's depth. ``NaN`` or ``Infinity`` for a size
        counts as not given (:func:`~app.engine.chat.model_files.config_shape`)."""
        raw = fetch_small_file(
            repo_id,
            "config.json",
            endpoint=self._endpoint,
            token=self._token,
            listed_size=listed_size,
        )
        try:
            config = parse_bounded_json(raw or b"null")
        except ValueError:
            return None
        return config if isinstance(config, dict) else None


def architecture_in(configs: Mapping[str, Any] | None) -> str:
    """A config's model type (the text config's when the top level has none)."""
    if not configs:
        return ""
    text = configs.get("text_config")
    text = text if isinstance(text, dict) else {}
    return str(configs.get("model_type") or text.get("model_type") or "")
