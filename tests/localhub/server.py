"""The local test hub: two HTTP servers (main API + storage origin) over one state.

Why two origins: on the real Hub, LFS downloads are 302-redirected and LFS uploads are PUT to a
storage host on another origin, and the client must not send its token there. The main API binds
127.0.0.1 and the storage origin 127.0.0.2 (same loopback, different host). Where 127.0.0.2
cannot be bound (macOS has only 127.0.0.1 by default), the storage origin falls back to
127.0.0.1 on another port — still a different origin to the client, so the same rules apply.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path

from tests.localhub import api_routes, collection_routes, lfs_routes, listing_routes
from tests.localhub.auth import TokenPolicy
from tests.localhub.context import HubContext
from tests.localhub.faults import FaultPlan
from tests.localhub.hubcollections import CollectionBook
from tests.localhub.store import HubStore
from tests.localhub.traffic import Traffic
from tests.localhub.wire import HubServer

API_ROUTES = [
    *listing_routes.ROUTES,
    *api_routes.ROUTES,
    *lfs_routes.API_ROUTES,
    *collection_routes.ROUTES,
]
DEFAULT_MULTIPART_THRESHOLD = 64 * 1024 * 1024
DEFAULT_MULTIPART_CHUNK = 16 * 1024 * 1024


class LocalHub:
    """A running local hub. Use as a context manager, or ``start()`` / ``stop()``.

    ``token``: the only token accepted for writes (None: any token is the configured ``user``).
    ``read_only_tokens``: tokens that authenticate as ``user`` with the read role.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        storage_host: str = "127.0.0.2",
        storage_port: int = 0,
        user: str = "mtp-tester",
        orgs: tuple[str, ...] = (),
        token: str | None = None,
        read_only_tokens: tuple[str, ...] = (),
        verbose: bool = False,
    ) -> None:
        self.context = HubContext(
            store=HubStore(Path(data_dir)),
            collections=CollectionBook(Path(data_dir)),
            policy=TokenPolicy(user, tuple(orgs), token, tuple(read_only_tokens)),
            verbose=verbose,
        )
        self._address = (host, port)
        self._storage_address = (storage_host, storage_port)
        self._servers: list[HubServer] = []
        self._threads: list[threading.Thread] = []
        self.storage_fell_back = False
        self.restore_defaults()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> LocalHub:
        api = HubServer(self._address, self.context, "api", API_ROUTES)
        try:
            storage = HubServer(
                self._storage_address, self.context, "storage", lfs_routes.STORAGE_ROUTES
            )
        except OSError:
            self.storage_fell_back = True
            storage = HubServer(
                (self._address[0], 0), self.context, "storage", lfs_routes.STORAGE_ROUTES
            )
        self._servers = [api, storage]
        self.context.api_url = _url(api)
        self.context.storage_url = _url(storage)
        for server in self._servers:
            thread = threading.Thread(
                target=server.serve_forever, name=f"localhub-{server.origin}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        self._servers, self._threads = [], []

    def __enter__(self) -> LocalHub:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # -- what tests use --------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """The main API URL, the value for ``HF_ENDPOINT``."""
        return self.context.api_url

    @property
    def storage_endpoint(self) -> str:
        return self.context.storage_url

    @property
    def store(self) -> HubStore:
        return self.context.store

    @property
    def traffic(self) -> Traffic:
        return self.context.traffic

    @property
    def faults(self) -> FaultPlan:
        return self.context.faults

    @property
    def user(self) -> str:
        return self.context.policy.user

    def restore_defaults(self) -> None:
        """Default behaviour: LFS via 302 redirects, multipart from 64 MiB in 16 MiB parts."""
        self.context.redirect_lfs = True
        self.context.multipart_threshold = DEFAULT_MULTIPART_THRESHOLD
        self.context.multipart_chunk_size = DEFAULT_MULTIPART_CHUNK

    def reset(self) -> None:
        """Empty every repo and collection, clear faults and counters, restore defaults."""
        self.context.store.reset()
        self.context.collections.reset()
        self.context.traffic.reset()
        self.context.faults.clear()
        with self.context.uploads_lock:
            self.context.uploads.clear()
        self.context.forged_listing.clear()
        self.context.repo_stats.clear()
        self.restore_defaults()

    def seed_folder(self, repo_id: str, folder: Path, message: str = "Upload folder") -> str:
        """Put a local folder into ``repo_id`` as one commit, written straight into the hub's
        storage (no HTTP, no counters touched); returns the commit id."""
        return self.context.store.commit_folder(repo_id, folder, message).oid

    def seed_files(
        self, repo_id: str, files: Mapping[str, bytes | Path], message: str = "Upload files"
    ) -> str:
        """Commit files (contents or local paths) straight into storage; returns the commit id."""
        return self.context.store.commit_files(repo_id, files, message).oid

    def set_stats(self, repo_id: str, *, downloads: int = 0, likes: int = 0) -> None:
        """The download and like counts the model listing shows and sorts by."""
        self.context.repo_stats[repo_id] = {"downloads": downloads, "likes": likes}

    def forge_listing(self, repo_id: str, stored_path: str, **fields: object) -> None:
        """Make the tree listing show ``stored_path`` with other fields (``path``, ``oid``,
        ``size``, ``lfs_oid``): a hostile or broken Hub, while the stored file stays as it is."""
        self.context.forged_listing[(repo_id, stored_path)] = dict(fields)

    def head(self, repo_id: str, branch: str = "main") -> str:
        """The commit a branch points at now."""
        return self.context.store.repo(repo_id).branches[branch]

    def read_file(self, repo_id: str, path: str, revision: str = "main") -> bytes:
        """A file's content as stored (for assertions, without any HTTP)."""
        store = self.context.store
        commit = store.repo(repo_id).resolve(revision)
        if commit is None or path not in commit.files:
            raise FileNotFoundError(f"{path} not in {repo_id}@{revision}")
        return store.content_path(commit.files[path]).read_bytes()


def _url(server: HubServer) -> str:
    host, port = server.server_address[:2]
    return f"http://{host}:{port}"
