"""pytest fixtures that point the real ``huggingface_hub`` client at the local hub.

Why this shape: ``huggingface_hub`` reads ``HF_ENDPOINT``, ``HF_HOME`` and ``HF_HUB_DISABLE_XET``
once, when it is first imported. So :func:`configure_client_environment` reserves a free port and
sets those variables at the very top of ``tests/conftest.py``, before any test module can import
the client; the session fixture then starts the hub on that port. It also removes any real token
from the environment, so a test can never send one anywhere. Each test gets an empty hub
(``local_hub``), ``HF_TOKEN`` set to :data:`TEST_TOKEN`, and an empty Hugging Face cache.

Identities: every request with :data:`TEST_TOKEN` is user :data:`HUB_USER`, member of
:data:`HUB_ORGS`; :data:`READ_ONLY_TOKEN` is the same user with a read-only token; any other
token is rejected with 401.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.localhub.server import LocalHub
from tests.ports import free_port

if TYPE_CHECKING:
    from huggingface_hub import HfApi

TEST_TOKEN = "hf_localhub_write_token_for_tests_only"
READ_ONLY_TOKEN = "hf_localhub_read_token_for_tests_only"
HUB_USER = "mtp-tester"
HUB_ORGS = ("acme",)

_CLEARED_VARIABLES = (
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "HF_TOKEN_PATH",
    "HF_HUB_CACHE",
    "HUGGINGFACE_HUB_CACHE",
    "HF_ASSETS_CACHE",
    "HF_XET_CACHE",
    "HF_HUB_OFFLINE",
    "HUGGINGFACE_CO_STAGING",
    "MTP_STUDIO_COLLECTION",
)
_session: dict[str, object] = {}


def configure_client_environment() -> None:
    """Point ``huggingface_hub`` at the (future) local hub; call before anything imports it."""
    if _session:
        return
    if "huggingface_hub" in sys.modules:
        raise RuntimeError(
            "huggingface_hub was imported before tests/conftest.py configured it; "
            "it would keep talking to the real Hub. Import it inside tests, not at plugin load."
        )
    port = free_port()
    home = Path(tempfile.mkdtemp(prefix="mtp-studio-test-hf-home-"))
    for name in _CLEARED_VARIABLES:
        os.environ.pop(name, None)
    os.environ.update(
        {
            "HF_ENDPOINT": f"http://127.0.0.1:{port}",
            "HF_HOME": str(home),
            "HF_HUB_DISABLE_XET": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_DISABLE_UPDATE_CHECK": "1",
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        }
    )
    _session.update(port=port, home=home)


@pytest.fixture(scope="session")
def local_hub_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalHub]:
    """The hub for the whole session, on the port ``HF_ENDPOINT`` names."""
    configure_client_environment()
    hub = LocalHub(
        tmp_path_factory.mktemp("localhub-data"),
        port=int(_session["port"]),  # type: ignore[call-overload]
        user=HUB_USER,
        orgs=HUB_ORGS,
        token=TEST_TOKEN,
        read_only_tokens=(READ_ONLY_TOKEN,),
    )
    with hub:
        yield hub
    shutil.rmtree(Path(str(_session["home"])), ignore_errors=True)


@pytest.fixture
def local_hub(local_hub_server: LocalHub, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalHub]:
    """An empty hub, ``HF_TOKEN`` set to the test token, and an empty Hugging Face cache."""
    home = Path(os.environ["HF_HOME"])
    shutil.rmtree(home / "hub", ignore_errors=True)
    (home / "token").unlink(missing_ok=True)
    local_hub_server.reset()
    monkeypatch.setenv("HF_TOKEN", TEST_TOKEN)
    yield local_hub_server
    local_hub_server.reset()
    (home / "token").unlink(missing_ok=True)


@pytest.fixture
def hf_api(local_hub: LocalHub) -> HfApi:
    """A real ``HfApi`` client for the local hub, authenticated with the test token."""
    from huggingface_hub import HfApi

    return HfApi(endpoint=local_hub.endpoint, token=TEST_TOKEN)
