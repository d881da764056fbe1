"""Points every folder the app or huggingface_hub would use at a temporary one.

Tests of settings, the job store, downloads and the GUI must never read or write the real user
folders or token: ``MTP_STUDIO_HOME`` moves the app's platformdirs folders, and the
huggingface_hub constants (read once at import) are patched for the token file and the cache.
``HF_ENDPOINT`` stays as tests/conftest.py set it: the local test hub. The autouse :func:`home`
fixture (tests/conftest.py shares it with every test) does this for each test.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from huggingface_hub import constants


@dataclass(frozen=True)
class IsolatedHome:
    root: Path
    hf_home: Path

    @property
    def hub_cache(self) -> Path:
        return self.hf_home / "hub"

    @property
    def token_file(self) -> Path:
        return self.hf_home / "token"


def isolate(monkeypatch: pytest.MonkeyPatch, root: Path) -> IsolatedHome:
    hf_home = root / "hf-home"
    monkeypatch.setenv("MTP_STUDIO_HOME", str(root / "mtp-studio"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_HOME", str(hf_home))
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(hf_home / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(hf_home / "stored_tokens"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hf_home / "hub"))
    return IsolatedHome(root, hf_home)


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> IsolatedHome:
    """Every test runs on its own app and Hugging Face folders, beside (not in) its tmp_path."""
    return isolate(monkeypatch, tmp_path_factory.mktemp("home"))
